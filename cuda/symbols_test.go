package cuda

import (
	"reflect"
	"strings"
	"testing"
	"unsafe"
)

// TestSymbolTableComplete checks that every function address in fn is bound
// by exactly one symbol with a name, so no call can go to a zero address
// after a successful Load.
func TestSymbolTableComplete(t *testing.T) {
	byAddr := map[*uintptr]string{}
	names := map[string]bool{}
	for _, s := range symbols {
		if s.name == "" || !strings.HasPrefix(s.name, "cu") {
			t.Errorf("bad symbol name %q", s.name)
		}
		if s.addr == nil {
			t.Errorf("%s has no address slot", s.name)
		}
		if names[s.name] {
			t.Errorf("%s listed twice", s.name)
		}
		names[s.name] = true
		if prev, ok := byAddr[s.addr]; ok {
			t.Errorf("%s and %s share a slot", prev, s.name)
		}
		byAddr[s.addr] = s.name
	}
	v := reflect.ValueOf(&fn).Elem()
	for i := 0; i < v.NumField(); i++ {
		p := (*uintptr)(unsafe.Pointer(v.Field(i).UnsafeAddr()))
		if _, ok := byAddr[p]; !ok {
			t.Errorf("fn.%s is bound by no symbol", v.Type().Field(i).Name)
		}
	}
	if len(byAddr) != v.NumField() {
		t.Errorf("%d symbols for %d slots", len(byAddr), v.NumField())
	}
}

// TestVersionedNames checks the _v2 names that cuda.h maps the plain names
// to: binding the plain name would call the old ABI.
func TestVersionedNames(t *testing.T) {
	want := []string{
		"cuMemAlloc_v2", "cuMemFree_v2", "cuMemcpyHtoD_v2", "cuMemcpyHtoDAsync_v2",
		"cuMemcpyDtoH_v2", "cuMemcpyDtoHAsync_v2", "cuMemHostGetDevicePointer_v2",
		"cuMemGetInfo_v2", "cuMemHostRegister_v2", "cuStreamDestroy_v2",
		"cuEventDestroy_v2", "cuDevicePrimaryCtxRelease_v2", "cuEventElapsedTime_v2",
		"cuDeviceTotalMem_v2", "cuMemsetD8_v2", "cuMemcpyDtoD_v2", "cuMemGetAddressRange_v2",
	}
	names := map[string]symbol{}
	for _, s := range symbols {
		names[s.name] = s
	}
	for _, n := range want {
		if _, ok := names[n]; !ok {
			t.Errorf("%s missing from the symbol table", n)
		}
	}
	if names["cuEventElapsedTime_v2"].fallback != "cuEventElapsedTime" {
		t.Error("cuEventElapsedTime_v2 (CUDA 12.8+) needs its plain fallback")
	}
	for _, opt := range []string{"cuMemHostRegister_v2", "cuMemHostUnregister", "cuStreamWaitEvent",
		"cuMemcpyBatchAsync_v2", "cuMemcpyBatchAsync", "cuMemGetAddressRange_v2"} {
		if !names[opt].optional {
			t.Errorf("%s should be optional", opt)
		}
	}
	// The two batch copies (CUDA 12.8+) differ in ABI (_v2 has no failIdx):
	// each has its own slot, and neither may fall back to the other.
	v1, v2 := names["cuMemcpyBatchAsync"], names["cuMemcpyBatchAsync_v2"]
	if v1.addr != &fn.cuMemcpyBatchAsync || v2.addr != &fn.cuMemcpyBatchAsyncV2 || v1.fallback != "" || v2.fallback != "" {
		t.Error("cuMemcpyBatchAsync and cuMemcpyBatchAsync_v2 need separate slots and no fallback")
	}
}
