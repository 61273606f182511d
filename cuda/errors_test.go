package cuda

import (
	"errors"
	"strings"
	"testing"
)

func TestResultErrMapsToSentinels(t *testing.T) {
	tests := []struct {
		code     Result
		sentinel error
		name     string
	}{
		{1, ErrInvalidValue, "CUDA_ERROR_INVALID_VALUE"},
		{2, ErrOutOfMemory, "CUDA_ERROR_OUT_OF_MEMORY"},
		{3, ErrNotInitialized, "CUDA_ERROR_NOT_INITIALIZED"},
		{34, ErrStubLibrary, "CUDA_ERROR_STUB_LIBRARY"},
		{100, ErrNoDevice, "CUDA_ERROR_NO_DEVICE"},
		{101, ErrInvalidDevice, "CUDA_ERROR_INVALID_DEVICE"},
		{200, ErrInvalidImage, "CUDA_ERROR_INVALID_IMAGE"},
		{201, ErrInvalidContext, "CUDA_ERROR_INVALID_CONTEXT"},
		{218, ErrInvalidPTX, "CUDA_ERROR_INVALID_PTX"},
		{222, ErrUnsupportedPTX, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION"},
		{400, ErrInvalidHandle, "CUDA_ERROR_INVALID_HANDLE"},
		{600, ErrNotReady, "CUDA_ERROR_NOT_READY"},
		{700, ErrIllegalAddress, "CUDA_ERROR_ILLEGAL_ADDRESS"},
		{712, ErrAlreadyRegistered, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED"},
		{713, ErrNotRegistered, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED"},
		{719, ErrLaunchFailed, "CUDA_ERROR_LAUNCH_FAILED"},
		{800, ErrNotPermitted, "CUDA_ERROR_NOT_PERMITTED"},
		{801, ErrNotSupported, "CUDA_ERROR_NOT_SUPPORTED"},
		{999, ErrUnknown, "CUDA_ERROR_UNKNOWN"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := resultErr("cuTest", tt.code)
			if !errors.Is(err, tt.sentinel) {
				t.Fatalf("errors.Is(%v, sentinel %d) = false", err, tt.code)
			}
			var ce *Error
			if !errors.As(err, &ce) || ce.Code != tt.code || ce.Op != "cuTest" {
				t.Fatalf("errors.As gave %+v", ce)
			}
			if ce.Name != tt.name {
				t.Errorf("Name = %q, want %q", ce.Name, tt.name)
			}
			if ce.Description == "" {
				t.Errorf("%s has no description", tt.name)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "cuda: cuTest: "+tt.name) {
				t.Errorf("message %q lacks op and name", msg)
			}
			for _, other := range tests {
				if other.code != tt.code && errors.Is(err, other.sentinel) {
					t.Errorf("%s also matches %s", tt.name, other.name)
				}
			}
		})
	}
}

func TestSuccessIsNil(t *testing.T) {
	if err := resultErr("cuInit", Success); err != nil {
		t.Fatalf("Success gave %v", err)
	}
}

func TestUnknownCode(t *testing.T) {
	err := resultErr("cuX", 12345)
	if got := err.Error(); !strings.Contains(got, "CUDA_ERROR_12345") {
		t.Fatalf("unknown code message %q", got)
	}
	if errors.Is(err, ErrUnknown) {
		t.Fatal("code 12345 must not match ErrUnknown (999)")
	}
}

func TestResultTableNames(t *testing.T) {
	seen := map[string]Result{}
	for code, txt := range resultText {
		if code != 0 && !strings.HasPrefix(txt.name, "CUDA_ERROR_") {
			t.Errorf("%d: name %q", code, txt.name)
		}
		if txt.desc == "" {
			t.Errorf("%d: empty description", code)
		}
		if prev, dup := seen[txt.name]; dup {
			t.Errorf("name %s used by %d and %d", txt.name, prev, code)
		}
		seen[txt.name] = code
	}
}

func TestClosedResult(t *testing.T) {
	if err := check("cuX", resultClosed); !errors.Is(err, ErrClosed) {
		t.Fatalf("check(resultClosed) = %v", err)
	}
}
