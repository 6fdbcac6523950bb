"""Jobs the tests run through real workers; executions are recorded in the database."""
