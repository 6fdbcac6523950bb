Feature: Django tasks retried and dead-lettered by JobRetryBackend
  A Django `@task` run by JobRetryBackend gets the same retries and dead
  letters as a `@job`. Its caller sees all of it through Django's own API:
  `.enqueue()` returns a result id, and `get_result()` of that id reports the
  status, the errors of every attempt, the workers and the return value,
  across an operator's requeue too.

  These scenarios run real `manage.py runworker` processes against PostgreSQL
  and read the outcome only through `get_result()` (and, for the dead letter
  an operator acts on, the dead-letter list).

  Background:
    Given the tasks backend runs its tasks under the policy "three" of 3 attempts

  Scenario: A task that fails twice with a retryable error and then succeeds
    Given a task that fails retryably 2 times and then succeeds is enqueued
    When a worker runs until the task is finished
    Then the task ran 3 times
    And its result is SUCCESSFUL after 3 attempts
    And its result has 2 errors of class "builtins.ConnectionResetError"
    And its return value is what the task returned on its third run

  Scenario: A task that always fails retryably runs exactly 3 times
    Given a task that always fails retryably is enqueued
    When 2 burst workers poll side by side until the task is finished
    Then the task ran 3 times
    And its result is FAILED after 3 attempts
    And its result has 3 errors of class "builtins.ConnectionResetError"
    And the operator finds it in the dead letters with reason "exhausted"
    When workers poll for due jobs 2 more times
    Then the task ran 3 times

  Scenario: A task that fails fatally runs once
    Given a task that fails fatally is enqueued
    When a worker runs until the task is finished
    Then the task ran 1 time
    And its result is FAILED after 1 attempt
    And its result has 1 error of class "django_jobretry.exceptions.FatalError"
    And the operator finds it in the dead letters with reason "fatal"

  Scenario: A requeued dead task succeeds under the same result id
    Given a task that fails until its cause is fixed has died after 3 attempts
    When the cause is fixed
    And the operator requeues its dead letter
    Then its result is READY after 3 attempts
    When a worker runs until the task is finished
    Then the task ran 4 times
    And its result is SUCCESSFUL after 4 attempts
    And its result has 3 errors of class "builtins.ConnectionResetError"
    And its result went FAILED, READY, SUCCESSFUL under one id

  Scenario: A worker killed during a task that takes its context
    Given a worker with a 1 second lease is running
    And a task that takes its context and runs 3 seconds the first time is enqueued
    When the worker is killed while the task runs
    And another worker runs until the task is finished
    Then the task ran 2 times, in 2 different worker processes
    And its result is SUCCESSFUL after 2 attempts
    And its return value is 2, the attempt its context gave it
    And its result has 1 error of class "django_jobretry.exceptions.AttemptLost"
