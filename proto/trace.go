package proto

// Metadata keys of W3C Trace Context (https://www.w3.org/TR/trace-context/),
// in lower case as the specification writes them: a call that is part of a
// trace carries its parent's traceparent, and tracestate if there is one.
// rpcd's client passes an incoming call's traceparent on to the calls its
// handler makes; the gateway maps the HTTP headers of the same names.
const (
	MetaTraceParent = "traceparent"
	MetaTraceState  = "tracestate"
)

// MetaBaggage is the metadata key of W3C Baggage
// (https://www.w3.org/TR/baggage/), in its text form, as the HTTP header
// of the same name carries it: "key1=value1,key2=value2;property". rpcd's
// client passes an incoming call's baggage on as it does the trace
// context, and the gateway maps the header.
const MetaBaggage = "baggage"
