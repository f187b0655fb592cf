package postgres

// ListSQL is the query List runs, for the test that checks its plan.
const ListSQL = listSQL
