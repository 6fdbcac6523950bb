Feature: Workflows: a dead step blocks its flow, an operator's action resumes or ends it
  A flow's steps run as its graph says. A step that dies blocks the steps
  after it and leaves the others' results in place; the operator repairs and
  requeues it, or discards it and is told which steps that cancels. Each
  callback runs exactly once. A pause holds a flow's steps like any job, and
  an operator can cancel a flow outright.

  Scenario: A repaired and requeued dead step resumes its flow, and the success callback runs once
    Given a diamond flow A -> (B, C) -> D whose step B fails fatally
    When the jobs run until nothing is due
    Then the flow is blocked by B's dead letter
    And D has not run
    And C's result is kept
    And the death callback ran exactly once
    When the operator repairs B's arguments and requeues it
    And the jobs run until nothing is due
    Then B ran once, and D ran once after B and C
    And the success callback ran exactly once, after D
    And the completion callback ran exactly once
    And the flow is completed

  Scenario: A discarded dead step cancels what waits on it, and the completion callback runs once
    Given a diamond flow A -> (B, C) -> D whose step B fails fatally
    And the jobs have run until nothing is due
    When the operator asks to discard B's dead letter
    Then the confirmation names D and the success callback
    When the operator discards it
    And the jobs run until nothing is due
    Then D is cancelled and never ran
    And the success callback never ran
    And the completion callback ran exactly once
    And the flow is completed

  Scenario: A paused task holds a flow's ready steps without spending attempts
    Given a flow A -> B whose step B is of a task the operator has paused
    When the jobs run until nothing is due
    Then A has run and B is ready with 0 attempts
    And the flow is running
    When the operator resumes the task
    And the jobs run until nothing is due
    Then B ran once, at its first attempt
    And the flow is completed

  Scenario: An operator cancels a blocked flow
    Given a diamond flow A -> (B, C) -> D whose step B fails fatally
    And the jobs have run until nothing is due
    When the operator cancels the flow
    And the jobs run until nothing is due
    Then the flow is cancelled by the operator, with 3 steps cancelled
    And D is cancelled and never ran
    And the success callback never ran
    And the completion callback never ran
    And B's dead letter is kept
    And cancelling the flow again changes nothing
