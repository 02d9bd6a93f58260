//! The powercap reader (`/sys/class/powercap/intel-rapl:*`) on a fake sysfs tree whose names,
//! ranges and counters are the fuzzer's (see `joular_fuzz` for the description format).
#![no_main]

use joular_fuzz::FakeMachine;
use joular_user::energy::SourceKind;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    FakeMachine::parse(data).exercise(SourceKind::Powercap);
});
