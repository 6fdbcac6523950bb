Feature: Bulk requeue from the admin
  After an incident an operator filters the dead-letter list and requeues
  everything it holds, not one page of it - but only after a page that says
  how many will run again, and only what was counted there.

  Scenario: Requeue everything matching a filter, after a confirmation with counts
    Given 3 dead letters in queue "mail" and 1 in queue "billing"
    When the operator asks to requeue all dead letters of queue "mail"
    Then the confirmation asks "Requeue 3 dead letters?" and counts 3 new ready jobs
    And nothing has been requeued yet
    When the operator confirms
    Then the operator is told "3 dead letters requeued."
    And there are 3 ready jobs and the only dead letter left is in queue "billing"

  Scenario: A dead letter that dies after the confirmation is left alone
    Given 2 dead letters in queue "mail" and 0 in queue "billing"
    When the operator asks to requeue all dead letters of queue "mail"
    And another job of queue "mail" dies
    And the operator confirms
    Then the operator is told "2 dead letters requeued."
    And there are 2 ready jobs and the only dead letter left is in queue "mail"
