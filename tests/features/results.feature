Feature: Results of @job jobs
  A view enqueues the total of an order and reads it back once a worker has
  run it: a task declared with @job(keep_result=True) stores what it returns,
  as JSON, in the statement that records its success. A value that cannot be
  kept fails its job once, with an error that says why, and a requeued job's
  result is found by the id its first enqueue returned.

  Scenario: A kept result is read back by the job its enqueue returned
    Given the total of an order priced 3, 4 and 5 is enqueued by a task that keeps its result
    And the same total is enqueued by a task that keeps none
    When the worker runs the due jobs
    Then the first job's result is a total of 12 for 3 items
    And reading the second job's result says its task keeps none

  Scenario: A result too large to keep fails its job once, with a clear error
    Given a task that keeps its result is enqueued to return 70000 characters
    When the worker runs the due jobs
    Then it ran 1 time and is a fatal dead letter
    And its last error names the task, 70002 bytes as JSON and the limit of 65536
    And reading its result says it is a dead letter

  Scenario: A requeued job's result is found by its first id
    Given a task that keeps its result is enqueued to die on its first run, for "order-7"
    When the worker runs the due jobs
    And the operator requeues its dead letter
    And the worker runs the due jobs
    Then the result read by the first job is "order-7 done"
