Feature: Periodic schedules: one run per slot, counted catch-up and overlap, runs that are ordinary jobs
  A team declares a schedule once, in settings or on a job, and every worker
  may insert its due slots: the database lets exactly one of them do it. What
  runs after downtime, and while a run is still live, is the schedule's policy,
  and every slot that does not run is counted. A run is an ordinary job: its
  task's policy retries it, but never into the next slot.

  Downtime is made by moving a schedule's next slot back by whole slots, so the
  scenarios count slots and never wait for them. The slots are 366 days apart
  (the longest interval), so the newest missed one is within a minute of now,
  where catch_up "none" finds it on time, once in about 500,000 runs.

  Scenario Outline: After downtime the catch-up policy decides which missed slots run
    Given a schedule every 366 days with catch_up "<catch_up>" and overlap "allow"
    And no worker looked at it for 10 slots
    When a worker looks at its schedules
    Then the schedule made <runs> runs, of the newest slots
    And it counts <missed> missed slots

    Examples:
      | catch_up | runs | missed |
      | latest   | 1    | 9      |
      | all      | 5    | 5      |
      | none     | 0    | 10     |

  Scenario: A slot that falls while the last run is live is skipped and counted
    Given a schedule every 366 days with catch_up "latest" and overlap "skip"
    And no worker looked at it for 1 slots
    And a worker looked at its schedules
    And no worker looked at it for 1 slots
    When a worker looks at its schedules
    Then the schedule made 1 runs, of the newest slots
    And it counts 1 skipped slot

  Scenario: A run that keeps failing dies before its schedule's next slot
    Given a schedule every 366 days of a task that always fails
    And no worker looked at it for 1 slots
    And a worker looked at its schedules
    And its run may retry for five seconds more
    When workers run every due job until none is live
    Then the run is a dead letter with reason "deadline" that names its schedule and slot
    And it was attempted more than once

  Scenario: A typo in a cron expression fails manage.py check naming the schedule
    Given a schedule "nightly" with the cron expression "0 25 * * *"
    When manage.py check runs
    Then it reports E040 naming "nightly" and the cron expression
