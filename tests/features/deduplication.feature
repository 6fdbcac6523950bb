Feature: Deduplicated enqueues
  An order's invoice is sent once: while its job waits or runs, and for an
  hour after it was sent. A tenant's sync waiting in the queue takes the
  newest call instead of queueing a second sync.

  Scenario: One invoice per order for an hour after it was sent
    Given the invoice of order 9 is enqueued twice
    Then 1 invoice job exists and both enqueues returned it
    When the worker runs the due jobs
    And the invoice of order 9 is enqueued again
    Then the invoice ran 1 time and the enqueue returned the finished job
    When the invoice job finished 61 minutes ago by the database clock
    And the invoice of order 9 is enqueued again
    Then 2 invoice jobs exist

  Scenario: A waiting sync takes the newest call
    Given a sync of tenant 3 since "monday" is enqueued
    When a sync of tenant 3 since "tuesday" is enqueued
    And the worker runs the due jobs
    Then the sync ran 1 time, since "tuesday"
