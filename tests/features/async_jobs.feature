Feature: async def jobs on the worker's event loop
  Jobs that mostly wait (a partner's API, mail, files) are written `async def`.
  One worker process runs many of them at once on its event loop, beside its
  threads, with the same time limits, cancels and retries as plain jobs.

  These scenarios run real `manage.py runworker` processes against PostgreSQL.

  Scenario: Many waiting jobs share one worker's event loop
    Given 200 async jobs that each await 0.5 s
    When one worker runs them with --async-concurrency 100
    Then all 200 jobs have succeeded
    And 100 of them were in flight at once, in that one process

  Scenario: A coroutine past its time limit is cancelled and retried
    Given an async job whose first attempt awaits past its 1 s time limit
    When one worker runs them with --async-concurrency 100
    Then the job has succeeded on its attempt 2
    And its first attempt ended as "timeout" and its coroutine saw the cancel
