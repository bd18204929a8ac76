package pgstore

// ReapExpiredSQL returns Reap's delete statement for table, for tests
// that check its plan.
func ReapExpiredSQL(table string) string { return forTable(reapExpiredSQL, table) }

// RetireStrandedSQL returns Reap's retirement statement for table.
func RetireStrandedSQL(table string) string { return forTable(retireStrandedSQL, table) }

// InFlightSQL returns InFlight's statement for table.
func InFlightSQL(table string) string { return forTable(inFlightSQL, table) }

// Transient exposes transient to the tests.
var Transient = transient
