Feature: Progress of a long job
  A job that runs for minutes says how far it got with `progress(done, total,
  note=...)`. The operator reads it while the job runs, in `manage.py
  jobstatus`, on the job's admin page and in the job list; and once a job
  died, on its dead letter: how far did it get?

  These scenarios run real `manage.py runworker` processes against PostgreSQL.

  Scenario: A long job reports progress and an operator sees it
    Given a long job that has reported 3 of 10 rows, "copying <invoices>", under a worker
    Then jobstatus shows the running job at "3 of 10 (30%)" with its note
    And the job's admin page shows "3 of 10 (30%)" with its note, escaped
    And the job list shows "3 of 10 (30%)" under the job's status
    When the job finishes
    Then the job has succeeded and its page still shows "3 of 10 (30%)"
    And jobstatus shows no running job's progress

  Scenario: A job that dies keeps how far it got
    Given a job that broke at row 8 of 10 has died under a worker
    Then its dead letter's page shows it got to "7 of 10 (70%)", "rows: row 7"
    And `deadletters show` says it got to "7 of 10 (70%): rows: row 7"
