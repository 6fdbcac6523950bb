Feature: Retries and dead letters for a django-q2 cluster
  A project already running django-q2 with the ORM broker adds the
  adapter app and one setting. Tasks submitted with plain async_task are
  then retried under the policy, and the ones that cannot succeed are dead
  letters an operator handles in the admin, sending them back to django-q2.

  Scenario: A task that fails twice and then succeeds is retried with growing delays
    Given a django-q2 cluster running with the adapter
    When a task that fails twice before succeeding is submitted with async_task
    Then the cluster runs it 3 times, each retry later than the one before, and it succeeds
    And no dead letter is left

  Scenario: A task that always fails is one dead letter, requeued from the admin
    Given a django-q2 cluster running with the adapter
    When a task that always fails until it is fixed is submitted with async_task
    Then it becomes one dead letter from django-q2 after 3 attempts
    And the cluster does not run it again
    And the admin shows the dead letter with its 3 attempts
    And django-q2's own Resubmit on its failure refuses it, naming the dead letter
    When the fix is deployed and an operator requeues the dead letter in the admin
    Then the cluster runs the task again and it succeeds
    And no dead letter is left
