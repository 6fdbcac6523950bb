Feature: Retrying failed jobs
  Every failed attempt is classified as retryable or fatal. A retryable
  failure is retried on the policy's schedule until the attempts run out; a
  job that can no longer succeed becomes a dead letter and is never delivered
  again. A worker that dies mid-job loses no job: another worker recovers it
  once the lease runs out, and the lost run counts as an attempt.

  These scenarios run real `manage.py runworker` processes against PostgreSQL.

  Background:
    Given the retry policy "three" allows 3 attempts

  Scenario: A job that fails twice with a retryable error and then succeeds
    Given a job that fails retryably 2 times and then succeeds
    When a worker runs until the job is finished
    Then the job ran 3 times
    And the job succeeded after 3 attempts
    And its error history has 2 entries that ended "error"

  Scenario: A job that always fails retryably runs exactly max_attempts times
    Given a job that always fails retryably
    When 2 burst workers poll side by side until the job is finished
    Then the job ran 3 times
    And the job is a dead letter with reason "exhausted" after 3 attempts
    And its error history has 3 entries that ended "error"
    When workers poll for due jobs 2 more times
    Then the job ran 3 times

  Scenario: A job that fails fatally runs once
    Given a job that fails fatally
    When a worker runs until the job is finished
    Then the job ran 1 time
    And the job is a dead letter with reason "fatal" after 1 attempt
    And its error history has 1 entry that ended "fatal"
    When workers poll for due jobs 2 more times
    Then the job ran 1 time

  Scenario: A call the job's function cannot take is refused where it is made
    When a job is enqueued with a keyword argument its function does not take
    Then the enqueue is refused with a TypeError naming "tests.jobs_app.jobs.fatal() cannot take these arguments"
    And the refusal names "got an unexpected keyword argument 'colour'"
    And no job was stored

  Scenario: A job whose stored arguments no longer fit its function dies on its first attempt
    Given a job whose stored arguments no longer fit its function
    When a worker runs until the job is finished
    Then the job ran 0 times
    And the job is a dead letter with reason "fatal" after 1 attempt
    And its error history has 1 entry that ended "fatal"
    And its last entry says the rule "the stored arguments no longer match the function's signature"

  Scenario: A worker killed during a job
    Given a worker with a 1 second lease is running
    And a job that takes 2 seconds
    When the worker is killed while the job runs
    And another worker runs until the job is finished
    Then the job ran 2 times, in 2 different worker processes
    And the second run started only after the lease of the first had expired
    And the job succeeded after 2 attempts
    And its error history has 1 entry that ended "lease_expired"
