package redisstore

// Transient exposes transient to the tests.
var Transient = transient
