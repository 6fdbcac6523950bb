Feature: What is dying
  At 3 a.m. the dashboard says which tasks are dying, and of what error:
  deaths are counted as they happen, so an operator who requeues or discards
  some of them does not make the night look better than it was.

  These scenarios run real `manage.py runworker` processes against PostgreSQL.

  Scenario: Requeues and discards do not lower the deaths counted
    Given 4 jobs that fail fatally have died under a worker
    When the operator requeues 2 of their dead letters and discards 1
    Then the dashboard counts 4 deaths of that task in the last hour and in the last 24 hours
    And its chart of deaths per hour, last 24 hours, shows 4 in all
    And 1 of their dead letters is kept
