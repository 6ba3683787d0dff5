package blobsrc

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	"gocloud.dev/gcerrors"
	"google.golang.org/api/googleapi"

	"github.com/playhead/playhead/source"
)

// errPastEnd: the origin refused a range that starts at or past the object's end (416).
var errPastEnd = errors.New("range starts past the end of the object")

// mapErr wraps an SDK error with the source error the engine acts on. The HTTP status
// decides first, because gocloud.dev's codes differ by cloud for the same answer (a
// wrong S3 secret is Unknown, a GCS 403 is NotFound); then S3's error codes, then
// gocloud.dev's. Anything else stays transient: the fetcher retries it.
func (s *Source) mapErr(err error) error {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	switch status(err) {
	case http.StatusNotFound:
		return fmt.Errorf("%w: %v", source.ErrNotFound, err)
	case http.StatusPreconditionFailed:
		return fmt.Errorf("%w: %v", source.ErrChanged, err)
	case http.StatusUnauthorized, http.StatusForbidden:
		return fmt.Errorf("%w: %v", source.ErrPermission, err)
	case http.StatusRequestedRangeNotSatisfiable:
		return fmt.Errorf("%w: %v", errPastEnd, err)
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "ExpiredToken",
			"InvalidToken", "AllAccessDisabled", "AccountProblem":
			return fmt.Errorf("%w: %v", source.ErrPermission, err)
		case "InvalidRange":
			return fmt.Errorf("%w: %v", errPastEnd, err)
		}
	}
	switch gcerrors.Code(err) {
	case gcerrors.NotFound:
		return fmt.Errorf("%w: %v", source.ErrNotFound, err)
	case gcerrors.FailedPrecondition:
		return fmt.Errorf("%w: %v", source.ErrChanged, err)
	case gcerrors.PermissionDenied:
		return fmt.Errorf("%w: %v", source.ErrPermission, err)
	}
	return err
}

// status is the HTTP status of the answer behind an SDK error, or 0.
func status(err error) int {
	var aws *awshttp.ResponseError
	if errors.As(err, &aws) {
		return aws.HTTPStatusCode()
	}
	var az *azcore.ResponseError
	if errors.As(err, &az) {
		return az.StatusCode
	}
	var g *googleapi.Error
	if errors.As(err, &g) {
		return g.Code
	}
	return 0
}
