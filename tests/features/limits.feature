Feature: Concurrency limits across workers
  A partner takes one call per tenant at a time, and three calls at once in
  all. Two workers claim as much as they can; the limits decide what runs,
  and what waits spends nothing.

  Scenario: One job per tenant runs, the rest wait without spending an attempt
    Given 3 jobs of tenant 1 and 1 job of tenant 2, one at a time per tenant
    When two workers claim as many jobs as they can
    Then 1 job of tenant 1 and 1 job of tenant 2 are running
    And 2 jobs wait with no attempt spent
    When the running job of tenant 1 succeeds and the workers claim again
    Then 1 job of tenant 1 and 1 job of tenant 2 are running
    And 1 job waits with no attempt spent

  Scenario: Three at once in all, whichever worker claims
    Given 5 jobs limited to three at once
    When two workers claim as many jobs as they can
    Then 3 jobs are running
    And 2 jobs wait with no attempt spent
