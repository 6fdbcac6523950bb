Feature: Importing django-q2's existing failures
  A team adopting the django-q2 adapter already has failed tasks that
  django-q2 recorded. The import turns them into dead letters to requeue
  or discard like any other, once, however often it runs.

  Scenario: The import command converts failures once
    Given a django-q2 task that failed on the cluster and that django-q2 dropped
    And a django-q2 task that the adapter has made a dead letter
    When the operator imports django-q2's failures
    Then the dropped task is one dead letter from django-q2, next to the adapter's
    When the operator imports django-q2's failures again
    Then nothing more is imported and there are still 2 dead letters
    When the operator requeues the imported dead letter
    Then the cluster runs the task again
