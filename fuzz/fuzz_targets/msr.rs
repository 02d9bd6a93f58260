//! The MSR reader (`/dev/cpu/N/msr`, vendor from `/proc/cpuinfo`) on a fake tree whose vendor,
//! topology and register values are the fuzzer's (see `joular_fuzz` for the description format).
#![no_main]

use joular_fuzz::FakeMachine;
use joular_user::energy::SourceKind;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    FakeMachine::parse(data).exercise(SourceKind::Msr);
});
