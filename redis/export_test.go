package redis

// ParseParsedURL exposes the URL parser of a parsed URL to the external tests.
var ParseParsedURL = parseURL
