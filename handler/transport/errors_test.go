package transport

import (
	"errors"
	"fmt"
	"testing"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/proto"
)

// TestReceived: Received marks a copy of an Unprocessed *Error, which
// keeps its code, message and flag for its caller but no longer answers a
// call Unprocessed, wrapped or not; it leaves other errors, and marked
// ones, as they are.
func TestReceived(t *testing.T) {
	refused := &handler.Error{Code: proto.CodeResourceExhausted, Message: "queue full", Unprocessed: true}
	got := Received(refused)
	var e *handler.Error
	if !errors.As(got, &e) || e == refused || e.Code != refused.Code || e.Message != refused.Message || !handler.IsUnprocessed(got) {
		t.Fatalf("Received(%v) = %#v", refused, got)
	}
	if !AnswersUnprocessed(refused) || AnswersUnprocessed(got) || AnswersUnprocessed(fmt.Errorf("placing: %w", got)) {
		t.Errorf("AnswersUnprocessed: own %v, received %v, wrapped %v; want true, false, false",
			AnswersUnprocessed(refused), AnswersUnprocessed(got), AnswersUnprocessed(fmt.Errorf("placing: %w", got)))
	}
	if again := Received(got); again != got {
		t.Errorf("Received of a received error made another copy")
	}
	plain, processed := errors.New("plain"), &handler.Error{Code: proto.CodeInternal}
	if Received(plain) != plain || Received(processed) != processed || Received(nil) != nil {
		t.Errorf("Received changed an error it has nothing to mark")
	}
}
