// Package handlerstate is what package handler keeps of each route, and of
// each error, that handler's own subpackages reach without handler
// exporting it: handler/transport runs a route's calls and moves a route
// whose inline runs keep passing their budget to the blocking pool;
// handler/schema describes a typed route from its Go types; both mark and
// read the errors that a call of a handler's own returned.
//
// Package handler makes a Route for each route it registers and sets the
// accessors in its init, the way grpc-go reaches the unexported state of
// its packages; nothing else sets anything here. The accessors are typed
// any because this package cannot name handler's types (handler imports
// it): their users assert the function types once, when they are
// initialized, never per call.
package handlerstate
