"""What a record says of the machine it ran on: the CPU's identity beyond its model name.

Two machines that both call themselves "AMD EPYC" can round differently (one with AVX-512, one without:
XLA:CPU compiles for the host's extensions); a record must tell them apart."""
from diffrl.plumbing.machine import cpu_identity, machine_record

X86 = """processor	: 0
vendor_id	: AuthenticAMD
cpu family	: 25
model		: 17
model name	: AMD EPYC
flags		: fpu sse4_2 avx avx2 fma f16c avx512f avx512bw avx512vl avx512_bf16 rdrand

processor	: 1
vendor_id	: GenuineIntel
cpu family	: 6
model		: 85
flags		: fpu sse4_2 avx
"""

ARM = """processor	: 0
BogoMIPS	: 243.75
Features	: fp asimd evtstrm aes sve
CPU implementer	: 0x41
CPU part	: 0xd40
"""


def test_x86_identity_from_the_first_processor(tmp_path):
    (tmp_path / "cpuinfo").write_text(X86)
    assert cpu_identity(tmp_path / "cpuinfo") == {
        "vendor": "AuthenticAMD", "family": "25", "model": "17",
        "simd": ["sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_bf16"]}


def test_arm_identity(tmp_path):
    (tmp_path / "cpuinfo").write_text(ARM)
    assert cpu_identity(tmp_path / "cpuinfo") == {"implementer": "0x41", "part": "0xd40", "simd": ["asimd", "sve"]}


def test_no_cpuinfo_gives_an_empty_identity(tmp_path):
    assert cpu_identity(tmp_path / "missing") == {}


def test_machine_record_carries_the_identity():
    record = machine_record()
    assert {"cpu", "cpu_identity", "cpu_count", "xla_flags", "jax_platforms"} <= set(record)
    assert record["cpu_identity"] == cpu_identity()
