package outbox

// DecodeRow is decodeRow, for the fuzz tests.
var DecodeRow = decodeRow
