Feature: The operator's console
  At 3 a.m. an operator asks what is failing, how late each queue is and
  which workers are alive. `manage.py jobstatus` and the admin dashboard
  answer from the database: every worker registers itself and says it is
  alive with each heartbeat, and one that stops heartbeating is shown as
  lost once its lease has run out.

  These scenarios run real `manage.py runworker` processes against PostgreSQL.

  Scenario: An operator sees two live workers, then a lost one
    Given a retrying job and a dead letter in queue "default"
    And a job in queue "idle", which no worker serves, due 1 minute ago
    And 2 workers with a 3 second lease, each running a long job
    Then jobstatus shows 2 live workers, each running 1 job
    And jobstatus shows queue "default" with 1 retrying, 2 running and 1 dead
    And jobstatus shows queue "idle" waiting for at least 60 seconds
    And the dashboard shows both workers as live, and 1 retrying job
    When one of the workers is killed with SIGKILL
    Then jobstatus shows that worker as lost and the other as live
    And the dashboard shows 1 live and 1 lost worker
