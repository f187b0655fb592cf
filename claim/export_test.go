package claim

// CheckServerVersion exports checkServerVersion to the tests.
var CheckServerVersion = checkServerVersion
