// Package handlerstate is what package handler keeps of each route, of
// each error and of each Call, that handler's own subpackages reach
// without handler exporting it: handler/transport runs a route's calls,
// moves a route whose inline runs keep passing their budget to the
// blocking pool, marks the errors a caller returns (transport.Received)
// and gives a Call the context whose end cancels it
// (transport.CancelWhen); handler/schema describes a typed route from its
// Go types. A stream travels in a context under StreamKey, from
// transport.WithStream to handler.StreamFrom.
//
// Package handler makes a Route for each route it registers and sets the
// accessors in its init, the way grpc-go reaches the unexported state of
// its packages; nothing else sets anything here. The accessors are typed
// any because this package cannot name handler's types (handler imports
// it): their users assert the function types once, when they are
// initialized, never per call.
package handlerstate
