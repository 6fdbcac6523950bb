Feature: Dead letters
  An operator finds dead letters, requeues or discards them, safely even
  when a colleague acts on the same one at the same moment.

  Scenario: A dead letter is listed with its attempt count and last error
    Given a job that always fails retryably has died after 3 attempts
    When the operator lists the dead letters
    Then the list shows it with 3 attempts and its last error

  Scenario: A requeued dead letter runs again and can succeed
    Given a job that fails 3 times and then succeeds has died after 3 attempts
    When the operator requeues it
    And a worker runs until nothing is due
    Then the job has succeeded
    And its requeue count is 1
    And it ran 4 times in total

  Scenario: Requeuing something that is no longer a dead letter fails and changes nothing
    Given a job that always fails retryably has died after 3 attempts
    And the operator has already requeued it
    When the operator requeues it again
    Then the operator is told it is not dead
    And there is exactly 1 job and 0 dead letters

  Scenario: Two concurrent requeues of one dead letter make exactly one job
    Given a job that always fails retryably has died after 3 attempts
    When two operators requeue it at the same moment
    Then exactly one requeue succeeds and the other is told it is not dead
    And there is exactly 1 job and 0 dead letters

  Scenario: A discarded dead letter is gone and never runs
    Given a job that always fails retryably has died after 3 attempts
    When the operator discards it
    And a worker runs until nothing is due
    Then the dead letter is gone
    And it ran 3 times in total

  Scenario: With only ready and running jobs, the dead-letter list is empty
    Given one ready job and one running job
    When the operator lists the dead letters
    Then the list is empty
