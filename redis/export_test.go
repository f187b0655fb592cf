package redis

// ParseURL exposes the URL parser to the external tests.
var ParseURL = parseURL
