// Package diffstore turns successive full snapshots of keyed values into the minimal set of
// changes between them.
//
// A backend that is handed the whole desired state on every sync (see the fullstate backend
// style) usually wants to touch only what changed: write one "wave" of keyed values with
// Set, call Finish, then read Added, Updated, Deleted and Unchanged, and program just those.
// The next Set (or an explicit Next) starts the following wave. Values are compared with a
// caller-supplied equality function, so large values can be compared by a cheap digest.
//
// A Store is not safe for concurrent use; a backend normally owns one per kind of object it
// programs and drives it from its single sync goroutine.
//
// This package imports only the standard library.
package diffstore
