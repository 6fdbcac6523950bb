Feature: Per-task options of a Django task (Django 6.1)
  On Django 6.1, the `@task` of JobRetryBackend takes the options of a
  `@job`: a retry policy, a time limit, deduplication and limits. They are
  checked where the task is declared, so a mistake stops the import with a
  message naming the task, the option and what is allowed. A real
  `manage.py runworker` honours them: the policy named on the task wins
  over the policy of its backend.

  Scenario: A task declared with the policy "three" retries three times and dies
    Given the tasks backend's own policy is "default", of 20 attempts
    And a task declared with @task(policy="three") that always fails is enqueued
    When a worker runs until the task is finished
    Then the task ran 3 times
    And its result is FAILED after 3 attempts
    And the operator finds its dead letter, exhausted under the policy "three"

  Scenario: An unknown option is refused where the task is declared
    When a task is declared with @task(polcy="three")
    Then the declaration is refused naming "polcy", the task and the options it takes
    And no task is registered under the function's name
