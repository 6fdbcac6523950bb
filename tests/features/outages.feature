Feature: Outages without mass death: pause, the circuit breaker and snooze keep held jobs alive
  When a partner is down, retrying spends every job's attempts in minutes.
  An operator can pause the task; a breaker holds it by itself after a burst
  of failures and lets one probe through after its cooldown; a job that is
  not ready yet snoozes without spending an attempt. Held jobs keep their
  attempts and run once the partner is back. Time passing is made by moving
  the breaker's end back, never by waiting.

  Scenario: A paused task is held, keeps its attempts, and runs once resumed
    Given 3 jobs of a task whose partner is down
    And an operator pauses the task
    When the due jobs are run
    Then no job of the task has started
    When the partner is back and the operator resumes the task
    And the due jobs are run
    Then every job of the task succeeded at its first attempt

  Scenario: A breaker opens after its threshold, and a probe's success releases the rest
    Given 6 jobs of a task whose partner is down, behind a breaker of 3 failures
    When the due jobs are run
    Then the breaker is open after 3 attempts
    When the cooldown ends and the partner is back
    Then the breaker lets exactly one probe through
    When the due jobs are run
    And the breaker's next beat comes
    Then the breaker is closed
    When every job is run
    Then every job of the task succeeded and none died

  Scenario: A snooze gives its attempt back until the snooze budget is spent
    Given a job that snoozes, under a budget of 2 snoozes
    When it is run 3 times
    Then it snoozed 2 times without spending an attempt
    And it died for "snooze_budget", the snooze past the budget its only attempt
