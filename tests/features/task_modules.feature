Feature: Tasks kept outside jobs.py, imported by workers through TASK_MODULES
  A worker runs only the tasks its start-up imports register: each app's
  jobs.py (and tasks.py), and the modules of JOBRETRY["TASK_MODULES"]. A team
  whose tasks live elsewhere lists their modules there; a worker that does
  not import a task's module says which modules it did import and how to add
  one, instead of blaming a rolling deploy.

  These scenarios run real `manage.py runworker --burst` processes against PostgreSQL.

  Scenario: A job kept in another module runs once its module is listed
    Given a job of "tests.task_modules.elsewhere" is enqueued
    When a burst worker runs with TASK_MODULES "tests.task_modules.elsewhere"
    Then the job succeeded after 1 attempt

  Scenario: A worker that does not import the module names the fix
    Given a job of "tests.task_modules.elsewhere" is enqueued
    When a burst worker runs without TASK_MODULES
    Then the job is waiting for a retry after 1 attempt
    And its error says it is an unknown task, lists "tests.jobs_app.jobs" and names JOBRETRY["TASK_MODULES"]
