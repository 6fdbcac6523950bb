Feature: The morning after an outage
  The partner API was down: most dead letters failed the same way and
  should simply run again, a few died of a bad argument and need repair.
  The operator sorts them by failure group, replays one group, finds one
  customer's dead letters by argument, and repairs one before requeueing it.

  Scenario: A failure group is replayed whole, and nothing else
    Given 5 dead letters that timed out on orders with different numbers
    And 2 dead letters that died of a missing key
    When the operator opens the failure groups
    Then the groups are 5 "PartnerTimeout" and 2 "KeyError"
    When the operator requeues the "PartnerTimeout" group and confirms
    Then the operator is told "5 dead letters requeued."
    And 5 jobs are ready and the 2 "KeyError" dead letters are left

  Scenario: One customer's dead letter is found by argument and repaired before its requeue
    Given 5 dead letters that timed out on orders with different numbers
    And a dead letter of customer 42 that died of a bad address "customer@"
    When the operator searches the dead letters by arguments for "customer_id=42"
    Then exactly that dead letter is listed
    When the operator repairs its address to "customer@example.com" and reviews the changes
    Then the review shows the address changing from "customer@" to "customer@example.com"
    When the operator confirms the repair
    Then a ready job has the address "customer@example.com"
    And its requeue history records the change by the operator
