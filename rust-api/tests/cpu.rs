//! CPU tests (no GPU, no driver): every operator's plan checks its shapes with typed errors, and
//! every launch a plan makes compiles to Tile IR, the generated entry at the plan's constants.

use std::ffi::{CStr, CString};

use serde_json::Value;
use tileport_kernels::support::{tileport_free, tileport_ir, tileport_last_error};
use tileport_ops::plan::{self, Constant, DEFAULT_NUM_SMS as SMS, KernelLaunch};
use tileport_ops::{Dtype, Error};

const FLOATS: [Dtype; 3] = [Dtype::F32, Dtype::F16, Dtype::BF16];

// ---------------------------------------------------------------- shape validation

fn assert_shape(result: tileport_ops::Result<impl std::fmt::Debug>, op: &str, says: &str) {
    match result {
        Err(Error::Shape { op: o, message }) if o == op && message.contains(says) => {}
        other => panic!("{op}: expected a shape error saying `{says}`, got {other:?}"),
    }
}

fn assert_unsupported(result: tileport_ops::Result<impl std::fmt::Debug>, op: &str, says: &str) {
    match result {
        Err(Error::Unsupported { op: o, message }) if o == op && message.contains(says) => {}
        other => panic!("{op}: expected an unsupported error saying `{says}`, got {other:?}"),
    }
}

#[test]
fn elementwise_shapes_must_match() {
    let plan = plan::vector_add(&[4, 5], &[5, 4]);
    assert_shape(plan, "vector_add", "`b` [5, 4] differs from `a` [4, 5]");
    assert_shape(plan::relu(&[3, 0]), "relu", "empty");
    assert_shape(plan::geglu(&[3], &[3, 1]), "geglu", "differs");
}

#[test]
fn silu_and_mul_needs_an_even_width() {
    assert_shape(plan::silu_and_mul(&[4, 7]), "silu_and_mul", "odd");
    assert_shape(plan::silu_and_mul(&[4, 2, 2]), "silu_and_mul", "[M, 2N]");
}

#[test]
fn row_ops_check_rank_weights_and_width() {
    assert_shape(plan::softmax(&[8], Dtype::F32, SMS), "softmax", "[M, N]");
    assert_shape(plan::rms_norm(&[8, 64], &[32], Dtype::F16, SMS), "rms_norm", "`w` must be [64]");
    let ln = plan::layer_norm(&[8, 64], &[64], &[63], Dtype::F16, SMS);
    assert_shape(ln, "layer_norm", "`b` must be [64]");
    let long = plan::rms_norm(&[2, 20000], &[20000], Dtype::F32, SMS);
    assert_unsupported(long, "rms_norm", "longer than 16384");
}

#[test]
fn rope_checks_tables_and_head_dim() {
    assert_shape(plan::rope(&[1, 8, 2, 63], &[8, 31], &[8, 31], SMS), "rope", "even");
    assert_shape(
        plan::rope(&[1, 8, 2, 64], &[8, 32], &[4, 32], SMS),
        "rope",
        "`sin` must be [8, 32]",
    );
}

#[test]
fn matmul_checks_inner_dims() {
    assert_shape(plan::matmul(&[4, 5], &[6, 7], Dtype::F16, SMS), "matmul", "inner dims");
    assert_shape(plan::bmm(&[2, 4, 5], &[3, 5, 7], Dtype::F16, SMS), "bmm", "batch or inner");
    assert_shape(plan::matmul(&[4, 5, 6], &[6, 7], Dtype::F16, SMS), "matmul", "[M, K]");
}

#[test]
fn fmha_checks_heads_dtype_and_head_dim() {
    let (q, kv) = ([2, 8, 100, 64], [2, 3, 100, 64]);
    assert_shape(plan::fmha(&q, &kv, &kv, true, Dtype::F16), "fmha", "Hkv | Hq");
    let kv = [2, 2, 100, 64];
    assert_unsupported(plan::fmha(&q, &kv, &kv, true, Dtype::F32), "fmha", "f32");
    let (q, kv) = ([2, 8, 100, 80], [2, 2, 100, 80]);
    assert_unsupported(plan::fmha(&q, &kv, &kv, true, Dtype::BF16), "fmha", "head dim 80");
}

#[test]
fn attention_variants_check_sinks_cap_and_head_dim() {
    let (q, kv) = ([2, 4, 100, 64], [2, 2, 100, 64]);
    assert_shape(
        plan::fmha_sinks(&q, &kv, &kv, &[2], 0, Dtype::F16),
        "fmha_sinks",
        "`sinks` must be [4]",
    );
    assert_shape(plan::fmha_sinks(&q, &q, &kv, &[4], 0, Dtype::F16), "fmha_sinks", "Hkv | Hq");
    let long = [2, 4, 100, 128];
    assert_unsupported(
        plan::fmha_sinks(&long, &long, &long, &[4], 8, Dtype::BF16),
        "fmha_sinks",
        "head dim 128",
    );
    let cap = plan::fmha_softcap(&long, &long, &long, 0.0, Dtype::F16);
    assert!(matches!(cap, Err(Error::Value { op: "fmha_softcap", .. })), "{cap:?}");
    assert_unsupported(
        plan::fmha_softcap(&q, &kv, &kv, 5.0, Dtype::F16),
        "fmha_softcap",
        "head dim 64",
    );
    assert_unsupported(
        plan::fmha_softcap(&long, &long, &long, 5.0, Dtype::F32),
        "fmha_softcap",
        "f32",
    );
}

#[test]
fn dropout_checks_p_and_offset() {
    let value = |r: tileport_ops::Result<KernelLaunch>, op: &str, says: &str| match r {
        Err(Error::Value { op: o, message }) if o == op && message.contains(says) => {}
        other => panic!("{op}: expected a value error saying `{says}`, got {other:?}"),
    };
    value(plan::dropout(&[4, 5], 0, 1.0), "dropout", "p must lie in [0, 1)");
    value(plan::dropout_bwd(&[4, 5], 0, -0.1), "dropout_bwd", "p must lie in [0, 1)");
    value(plan::dropout(&[4], -1, 0.5), "dropout", "offset");
    value(plan::dropout(&[4], i64::MAX - 3, 0.5), "dropout", "offset");
    assert_shape(plan::dropout(&[4, 0], 0, 0.5), "dropout", "empty");
    // as the Python operator: round(p * 2^24) with ties to even, 1 / (1 - p) rounded to f32
    assert_eq!(plan::dropout_threshold(0.3), 5033165);
    assert_eq!(plan::dropout_threshold(0.5 / f64::from(1u32 << 24)), 0);
    assert_eq!(plan::dropout_scale(0.3), (1.0f64 / 0.7) as f32);
}

/// The reference's mask is the Python operator's (`keep_mask` of ops/specs/dropout.py, p = 0.3, elements
/// 2990..3010; the first seed and offset are the spec's, whose counters cross 2^32 there).
#[test]
fn dropout_reference_mask_is_the_python_operators() {
    let threshold = plan::dropout_threshold(0.3);
    for (seed, offset, want) in [
        (0x5EED_1234_ABCD, (1i64 << 32) - 3000, "10111001111101001101"),
        (-77, 5, "01100000110111000111"),
    ] {
        let got: String = (2990..3010)
            .map(|i| {
                if tileport_ops::reference::dropout_keep(i, seed, offset, threshold) {
                    '1'
                } else {
                    '0'
                }
            })
            .collect();
        assert_eq!(got, want, "seed {seed}, offset {offset}");
    }
}

#[test]
fn cross_entropy_checks_rows() {
    assert_shape(plan::cross_entropy(&[8], &[8], SMS), "cross_entropy", "[M, V]");
    assert_shape(
        plan::cross_entropy(&[8, 100], &[7], SMS),
        "cross_entropy",
        "`labels` must be [8]",
    );
    let bwd = plan::cross_entropy_bwd(&[8, 100], &[8], &[8], &[8, 1], SMS);
    assert_shape(bwd, "cross_entropy_bwd", "`dloss` must be [8]");
}

// ---------------------------------------------------------------- the Python operators' plans

fn dtype_named(name: &str) -> Dtype {
    FLOATS.into_iter().find(|d| d.name() == name).unwrap()
}

/// The plan of a fixture case, by the operator's name.
fn rust_plan(case: &Value) -> Vec<KernelLaunch> {
    let shapes: Vec<Vec<usize>> = serde_json::from_value(case["shapes"].clone()).unwrap();
    let dtype = dtype_named(case["dtype"].as_str().unwrap());
    let x = &shapes[0][..];
    let last = x.last().copied().unwrap_or(0);
    let one = |launch: tileport_ops::Result<KernelLaunch>| vec![launch.unwrap()];
    match case["op"].as_str().unwrap() {
        "vector_add" => one(plan::vector_add(x, x)),
        "relu" => one(plan::relu(x)),
        "gelu" => one(plan::gelu(x)),
        "swiglu" => one(plan::swiglu(x, x)),
        "geglu" => one(plan::geglu(x, x)),
        "silu_and_mul" => one(plan::silu_and_mul(x)),
        "softmax" => plan::softmax(x, dtype, SMS).unwrap(),
        "rms_norm" => one(plan::rms_norm(x, &[last], dtype, SMS)),
        "layer_norm" => one(plan::layer_norm(x, &[last], &[last], dtype, SMS)),
        "rope" => one(plan::rope(x, &[x[1], last / 2], &[x[1], last / 2], SMS)),
        "matmul" => one(plan::matmul(x, &shapes[1], dtype, SMS)),
        "bmm" => one(plan::bmm(x, &shapes[1], dtype, SMS)),
        "fmha" => {
            let causal = case["flag"].as_bool().unwrap();
            one(plan::fmha(x, &shapes[1], &shapes[1], causal, dtype))
        }
        "fmha_sinks" => {
            let window = case["flag"].as_u64().unwrap() as usize;
            one(plan::fmha_sinks(x, &shapes[1], &shapes[1], &[x[1]], window, dtype))
        }
        "fmha_softcap" => one(plan::fmha_softcap(x, &shapes[1], &shapes[1], 5.0, dtype)),
        "dropout" => one(plan::dropout(x, 1 << 32, 0.3)),
        "fmha_bwd" => {
            let (kv, causal, rows) = (&shapes[1], case["flag"].as_bool().unwrap(), &x[..3]);
            plan::fmha_bwd(x, kv, kv, x, rows, x, rows, causal, dtype).unwrap()
        }
        "flash_decode" => {
            plan::flash_decode(x, &shapes[1], &shapes[1], &x[..1], dtype, SMS).unwrap()
        }
        "flash_decode_paged" => {
            let (kv, table) = (&shapes[1], &shapes[2]);
            plan::flash_decode_paged(x, kv, kv, table, &x[..1], dtype, SMS).unwrap()
        }
        "flash_decode_sinks" => {
            let window = case["flag"].as_u64().unwrap() as usize;
            let kv = &shapes[1];
            plan::flash_decode_sinks(x, kv, kv, &x[..1], &x[1..2], window, dtype, SMS).unwrap()
        }
        "flash_decode_softcap" => {
            plan::flash_decode_softcap(x, &shapes[1], &shapes[1], &x[..1], 5.0, dtype, SMS).unwrap()
        }
        "mla_decode" => {
            let (b, h, s) = (x[0], x[1], shapes[1][1]);
            plan::mla_decode(x, &[b, h, 64], &shapes[1], &[b, s, 64], &[b], dtype, SMS).unwrap()
        }
        "mla_prefill" => {
            let (b, h, s) = (x[0], x[1], x[2]);
            one(plan::mla_prefill(x, &[b, h, s, 64], &shapes[1], &[b, s, 64], &[b], dtype))
        }
        "moe_route" => {
            let k = case["flag"][0].as_u64().unwrap() as usize;
            plan::moe_route(x, k, case["flag"][1].as_u64().unwrap() as usize).unwrap()
        }
        "moe_topk_softmax" | "moe_topk_sigmoid" => {
            let k = case["flag"].as_u64().unwrap() as usize;
            one(plan::moe_topk(x, k, case["op"] == "moe_topk_sigmoid"))
        }
        "matmul_splitk" => plan::matmul_splitk(x, &shapes[1], dtype, SMS).unwrap(),
        "cross_entropy" => one(plan::cross_entropy(x, &x[..1], SMS)),
        "cross_entropy_bwd" => one(plan::cross_entropy_bwd(x, &x[..1], &x[..1], &x[..1], SMS)),
        "dropout_bwd" => one(plan::dropout_bwd(x, 1 << 32, 0.3)),
        op => panic!("the fixture names an operator the API lacks: {op}"),
    }
}

fn launch_json(launch: &KernelLaunch) -> Value {
    let constants: serde_json::Map<String, Value> = launch
        .constants
        .iter()
        .map(|(name, c)| {
            let value = match *c {
                Constant::Int(v) => Value::from(v),
                Constant::Bool(v) => Value::from(v),
            };
            (name.to_string(), value)
        })
        .collect();
    serde_json::json!({"kernel": launch.kernel, "grid": launch.grid, "constants": constants})
}

/// rust-api/tests/data/plans.json: the launches each Python operator makes by default, written from
/// the specs by tests/test_rust_api.py (which also checks the fixture still says what they do).
#[test]
fn plans_are_the_python_operators() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/plans.json");
    let fixture: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert_eq!(fixture["num_sms"], SMS);
    let cases = fixture["cases"].as_array().unwrap();
    assert!(cases.len() > 50, "the fixture has {} cases", cases.len());
    for case in cases {
        let ours: Vec<Value> = rust_plan(case).iter().map(launch_json).collect();
        assert_eq!(&Value::from(ours), &case["launches"], "{} {}", case["op"], case["shapes"]);
    }
}

// ---------------------------------------------------------------- Tile IR of every launch

/// The manifest the generator wrote beside the kernels (each entry's generic argument list).
fn manifest() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../rust/kernels.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("rust/kernels.json")).unwrap()
}

fn constant_text(c: Constant) -> String {
    match c {
        Constant::Int(v) => v.to_string(),
        Constant::Bool(v) => v.to_string(),
    }
}

/// Whether a manifest variant is the one a launch takes: its pinned flags and its element type.
fn serves(variant: &Value, launch: &KernelLaunch, dtype: Dtype) -> bool {
    let pinned = variant["pinned"].as_object().unwrap();
    let flags_match = pinned.iter().all(|(name, v)| {
        let ours = launch.constants.iter().find(|(n, _)| n == name).map(|(_, c)| *c);
        matches!(ours, Some(Constant::Bool(b)) if v.as_bool() == Some(b))
    });
    // arrays of a generic element type take one of its arms; an entry without one is for one dtype
    let vars = variant["dtype_vars"].as_object().unwrap();
    let declared: Vec<&str> = variant["array_dtypes"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_str().unwrap())
        .collect();
    let generic: Vec<&&str> = declared.iter().filter(|d| vars.contains_key(**d)).collect();
    let takes = if generic.is_empty() {
        // an entry of integer arrays only (moe_align) serves any float dtype of the plan
        let floats = declared.iter().filter(|d| FLOATS.iter().any(|f| f.name() == **d));
        floats.into_iter().all(|d| *d == dtype.name())
    } else {
        generic.iter().all(|d| vars[**d].as_array().unwrap().iter().any(|a| a == dtype.name()))
    };
    flags_match && takes
}

/// A derived generic of the manifest: an integer, a constant, or `(a op b)` of those.
fn eval(expr: &str, launch: &KernelLaunch) -> i64 {
    let expr = expr.trim();
    if let Some(inner) = expr.strip_prefix('(').and_then(|e| e.strip_suffix(')')) {
        return eval(inner, launch);
    }
    for op in [" + ", " - ", " * ", " // ", " % "] {
        if let Some((a, b)) = expr.split_once(op) {
            let (a, b) = (eval(a, launch), eval(b, launch));
            return match op.trim() {
                "+" => a + b,
                "-" => a - b,
                "*" => a * b,
                "//" => a.div_euclid(b),
                _ => a.rem_euclid(b),
            };
        }
    }
    expr.parse().unwrap_or_else(|_| launch.int(expr) as i64)
}

/// The entry a launch runs and its generic arguments (every length dynamic, as captures take them).
fn entry_and_generics(manifest: &Value, launch: &KernelLaunch, dtype: Dtype) -> (String, String) {
    let entries = manifest["entries"].as_array().unwrap();
    let entry = entries.iter().find(|e| e["kernel"] == launch.kernel);
    let entry = entry.unwrap_or_else(|| panic!("no kernel `{}` in the manifest", launch.kernel));
    let variants = entry["variants"].as_array().unwrap();
    let variant = variants.iter().find(|v| serves(v, launch, dtype));
    let variant =
        variant.unwrap_or_else(|| panic!("no entry of `{}` serves the plan", launch.kernel));
    let generics: Vec<String> = variant["generics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            let name = g.as_str().unwrap();
            if variant["dtype_vars"].get(name).is_some() {
                dtype.name().to_string()
            } else if let Some(expr) = variant["derived"].get(name) {
                eval(expr.as_str().unwrap(), launch).to_string()
            } else {
                let found = launch.constants.iter().find(|(n, _)| *n == name);
                constant_text(found.unwrap_or_else(|| panic!("no value for generic `{name}`")).1)
            }
        })
        .collect();
    (variant["entry"].as_str().unwrap().to_string(), generics.join(","))
}

/// The Tile IR text of a generated entry, compiled on the CPU for sm_90.
fn tile_ir(entry: &str, generics: &str) -> Result<String, String> {
    let (entry, generics) = (CString::new(entry).unwrap(), CString::new(generics).unwrap());
    let target = CString::new("sm_90").unwrap();
    let (mut text, mut text_len) = (std::ptr::null_mut(), 0usize);
    let (mut code, mut code_len) = (std::ptr::null_mut(), 0usize);
    // SAFETY: every pointer is valid for the call; the buffers it returns are freed below.
    let rc = unsafe {
        tileport_ir(
            entry.as_ptr(),
            generics.as_ptr(),
            target.as_ptr(),
            &mut text,
            &mut text_len,
            &mut code,
            &mut code_len,
        )
    };
    if rc != 0 {
        // SAFETY: the failed call set this thread's message.
        return Err(unsafe { CStr::from_ptr(tileport_last_error()) }.to_string_lossy().into());
    }
    // SAFETY: the call returned `text_len` bytes at `text` and `code_len` at `code`.
    let ir = unsafe { std::slice::from_raw_parts(text, text_len) }.to_vec();
    unsafe {
        tileport_free(text, text_len);
        tileport_free(code, code_len);
    }
    Ok(String::from_utf8(ir).unwrap())
}

fn assert_compiles(launches: &[KernelLaunch], dtype: Dtype) {
    let manifest = manifest();
    for launch in launches {
        let (entry, generics) = entry_and_generics(&manifest, launch, dtype);
        let ir = tile_ir(&entry, &generics)
            .unwrap_or_else(|e| panic!("{entry}<{generics}> does not compile: {e}"));
        assert!(ir.contains(&entry), "{entry}: the Tile IR has no such entry:\n{ir}");
    }
}

#[test]
fn elementwise_ops_compile() {
    let x = [1000, 1000];
    let launches = [plan::vector_add(&x, &x), plan::relu(&x), plan::gelu(&x), plan::swiglu(&x, &x)];
    for (launch, dtype) in launches.into_iter().zip(FLOATS.into_iter().cycle()) {
        assert_compiles(&[launch.unwrap()], dtype);
    }
    assert_compiles(&[plan::geglu(&[7, 33], &[7, 33]).unwrap()], Dtype::BF16);
    assert_compiles(&[plan::silu_and_mul(&[300, 2000]).unwrap()], Dtype::F16);
}

#[test]
fn row_ops_compile() {
    for (shape, dtype) in [([4096, 4096], Dtype::F16), ([1024, 16384], Dtype::BF16)] {
        assert_compiles(&plan::softmax(&shape, dtype, SMS).unwrap(), dtype);
    }
    assert_compiles(&plan::softmax(&[16, 100_003], Dtype::F32, SMS).unwrap(), Dtype::F32);
    assert_compiles(&plan::softmax(&[1024, 32768], Dtype::F16, SMS).unwrap(), Dtype::F16);
    let rms = plan::rms_norm(&[1000, 5120], &[5120], Dtype::BF16, SMS).unwrap();
    assert_compiles(&[rms], Dtype::BF16);
    for (m, n) in [(16384, 2048), (37, 1000)] {
        assert_compiles(
            &[plan::layer_norm(&[m, n], &[n], &[n], Dtype::F32, SMS).unwrap()],
            Dtype::F32,
        );
    }
}

#[test]
fn rope_entries_compile() {
    for x in
        [[4, 4096, 32, 128], [1, 16384, 8, 128], [1, 130, 5, 96], [1, 129, 8, 128], [2, 7, 3, 80]]
    {
        let table = [x[1], x[3] / 2];
        assert_compiles(&[plan::rope(&x, &table, &table, SMS).unwrap()], Dtype::F16);
    }
}

#[test]
fn matmuls_compile() {
    for dtype in [Dtype::F32, Dtype::BF16] {
        assert_compiles(&[plan::matmul(&[512, 4096], &[4096, 768], dtype, SMS).unwrap()], dtype);
    }
    assert_compiles(
        &[plan::bmm(&[8, 512, 512], &[8, 512, 512], Dtype::F16, SMS).unwrap()],
        Dtype::F16,
    );
}

#[test]
fn attention_variants_compile() {
    let (q, kv) = ([2, 8, 1000, 64], [2, 2, 1000, 64]);
    for (window, dtype) in [(0, Dtype::F16), (128, Dtype::BF16)] {
        assert_compiles(&[plan::fmha_sinks(&q, &kv, &kv, &[8], window, dtype).unwrap()], dtype);
    }
    let (q, kv) = ([2, 16, 1000, 128], [2, 8, 1000, 128]);
    assert_compiles(&[plan::fmha_softcap(&q, &kv, &kv, 5.0, Dtype::BF16).unwrap()], Dtype::BF16);
}

#[test]
fn cross_entropy_compiles() {
    for (x, dtype) in [([8192, 32000], Dtype::BF16), ([37, 1000], Dtype::F32)] {
        assert_compiles(&[plan::cross_entropy(&x, &x[..1], SMS).unwrap()], dtype);
        let bwd = plan::cross_entropy_bwd(&x, &x[..1], &x[..1], &x[..1], SMS).unwrap();
        assert_compiles(&[bwd], dtype);
    }
}

#[test]
fn matmul_splitk_checks_and_compiles() {
    let bad = plan::matmul_splitk(&[4, 5], &[6, 7], Dtype::F16, SMS);
    assert_shape(bad, "matmul_splitk", "inner dims");
    for dtype in [Dtype::F32, Dtype::BF16] {
        let launches = plan::matmul_splitk(&[128, 16384], &[16384, 256], dtype, SMS).unwrap();
        assert_eq!(launches.len(), 2);
        assert!(launches[0].grid[1] > 1, "{launches:?}"); // K is split
        assert_compiles(&launches, dtype);
    }
}

#[test]
fn moe_topk_checks_k_and_compiles() {
    for (k, says) in [(3, "power of two"), (32, "<= 16"), (16, "experts (8)")] {
        let bad = plan::moe_topk(&[100, 8], k, false);
        assert!(
            matches!(&bad, Err(Error::Value { op: "moe_topk_softmax", message }) if message.contains(says)),
            "{bad:?}"
        );
    }
    assert_shape(plan::moe_topk(&[100], 2, true), "moe_topk_sigmoid", "[T, E]");
    for (shape, k, sigmoid, dtype) in
        [([4097, 128], 8, false, Dtype::BF16), ([3, 256], 16, true, Dtype::F32)]
    {
        assert_compiles(&[plan::moe_topk(&shape, k, sigmoid).unwrap()], dtype);
    }
}

#[test]
fn flash_decode_checks_and_compiles() {
    let (q, kv) = ([2, 8, 64], [2, 2, 1000, 64]);
    assert_shape(
        plan::flash_decode(&q, &kv, &kv, &[3], Dtype::F16, SMS),
        "flash_decode",
        "kv_lens [B]",
    );
    let wide = [2, 64, 64];
    let many = plan::flash_decode(&wide, &kv, &kv, &[2], Dtype::F16, SMS);
    assert_unsupported(many, "flash_decode", "query group 32");
    // a long cache: split, then combined; a short one: one split that writes o and lse (FINAL)
    for (s, launches, dtype) in [(16384, 2, Dtype::BF16), (77, 1, Dtype::F16)] {
        let (q, kv) = ([2, 64, 128], [2, 8, s, 128]);
        let plan = plan::flash_decode(&q, &kv, &kv, &[2], dtype, SMS).unwrap();
        assert_eq!(plan.len(), launches, "{plan:?}");
        assert_eq!(plan[0].bool("FINAL"), launches == 1);
        assert_compiles(&plan, dtype);
    }
}

#[test]
fn fmha_bwd_checks_and_compiles() {
    let (q, kv) = ([2, 8, 300, 64], [2, 2, 300, 64]);
    let bad = plan::fmha_bwd(&q, &kv, &kv, &q, &[2, 8, 299], &q, &q[..3], true, Dtype::F16);
    assert_shape(bad, "fmha_bwd", "lse and dlse");
    for (d, causal, dtype) in [(64, true, Dtype::F16), (128, false, Dtype::BF16)] {
        let (q, kv) = ([2, 8, 300, d], [2, 2, 300, d]);
        let plan = plan::fmha_bwd(&q, &kv, &kv, &q, &q[..3], &q, &q[..3], causal, dtype).unwrap();
        assert_compiles(&plan, dtype);
    }
}

#[test]
fn decode_variants_check_and_compile() {
    let (q, pool) = ([2, 8, 128], [8, 2, 64, 128]);
    let bad = plan::flash_decode_paged(&q, &pool, &pool, &[3, 4], &[2], Dtype::F16, SMS);
    assert_shape(bad, "flash_decode_paged", "block_table is [B, pages]");
    let paged = plan::flash_decode_paged(&q, &pool, &pool, &[2, 4], &[2], Dtype::F16, SMS).unwrap();
    assert!(paged[0].bool("PAGED") && paged[0].int("BLOCK_N") == 64);
    assert_compiles(&paged, Dtype::F16);
    let (q, kv) = ([2, 8, 64], [2, 2, 4096, 64]);
    let sinks = plan::flash_decode_sinks(&q, &kv, &kv, &[2], &[8], 128, Dtype::BF16, SMS).unwrap();
    assert!(sinks[0].bool("SLIDING") && sinks[0].bool("HAS_SINKS"));
    assert_compiles(&sinks, Dtype::BF16);
    let bad = plan::flash_decode_sinks(&q, &kv, &kv, &[2], &[2], 0, Dtype::BF16, SMS);
    assert_shape(bad, "flash_decode_sinks", "`sinks` must be [8]");
    let (q, kv) = ([2, 8, 128], [2, 2, 4096, 128]);
    let cap = plan::flash_decode_softcap(&q, &kv, &kv, &[2], 5.0, Dtype::F16, SMS).unwrap();
    assert_compiles(&cap, Dtype::F16);
    let bad = plan::flash_decode_softcap(&q, &kv, &kv, &[2], -1.0, Dtype::F16, SMS);
    assert!(matches!(bad, Err(Error::Value { op: "flash_decode_softcap", .. })), "{bad:?}");
}

#[test]
fn moe_route_checks_and_compiles() {
    let bad = plan::moe_route(&[100, 8], 2, 48);
    assert!(
        matches!(&bad, Err(Error::Value { op: "moe_route", message }) if message.contains("block_size")),
        "{bad:?}"
    );
    let bad = plan::moe_route(&[100, 8], 3, 64);
    assert!(matches!(&bad, Err(Error::Value { op: "moe_route", .. })), "{bad:?}");
    assert_eq!(plan::moe_route_sizes(16, 8, 16), (16 + 8 * 15, 9));
    let (sorted, experts, total) = tileport_ops::reference::moe_align(&[1, 3, 1, 0], 4, 4);
    assert_eq!(sorted[..12], [3, 4, 4, 4, 0, 2, 4, 4, 1, 4, 4, 4]);
    assert_eq!((experts[..4].to_vec(), total), (vec![0, 1, 3, -1], 12));
    assert_compiles(&plan::moe_route(&[4097, 128], 8, 128).unwrap(), Dtype::BF16);
}

#[test]
fn mla_checks_and_compiles() {
    let bad = plan::mla_decode(
        &[2, 16, 512],
        &[2, 16, 32],
        &[2, 100, 512],
        &[2, 100, 64],
        &[2],
        Dtype::F16,
        SMS,
    );
    assert_shape(bad, "mla_decode", "q_pe [B, H, 64]");
    let decode = plan::mla_decode(
        &[2, 128, 512],
        &[2, 128, 64],
        &[2, 4099, 512],
        &[2, 4099, 64],
        &[2],
        Dtype::BF16,
        SMS,
    );
    assert_compiles(&decode.unwrap(), Dtype::BF16);
    let bad = plan::mla_prefill(
        &[1, 16, 100, 512],
        &[1, 16, 100, 64],
        &[1, 99, 512],
        &[1, 100, 64],
        &[1],
        Dtype::F16,
    );
    assert_shape(bad, "mla_prefill", "ckv [B, S, 512]");
    let prefill = plan::mla_prefill(
        &[1, 16, 100, 512],
        &[1, 16, 100, 64],
        &[1, 100, 512],
        &[1, 100, 64],
        &[1],
        Dtype::F16,
    );
    assert_compiles(&[prefill.unwrap()], Dtype::F16);
}

#[test]
fn dropout_compiles() {
    for (x, dtype) in [(&[4097][..], Dtype::F32), (&[1000, 1000][..], Dtype::BF16)] {
        assert_compiles(&[plan::dropout(x, 0, 0.3).unwrap()], dtype);
        assert_compiles(&[plan::dropout_bwd(x, 0, 0.3).unwrap()], dtype);
    }
}

#[test]
fn fmha_compiles_causal_and_not() {
    let (q, kv) = ([2, 16, 2048, 128], [2, 4, 2048, 128]);
    for (causal, dtype) in [(true, Dtype::F16), (false, Dtype::BF16)] {
        assert_compiles(&[plan::fmha(&q, &kv, &kv, causal, dtype).unwrap()], dtype);
    }
}

#[test]
fn the_ir_carries_the_plans_tile() {
    let launch = plan::vector_add(&[1000, 1000], &[1000, 1000]).unwrap();
    let (entry, generics) = entry_and_generics(&manifest(), &launch, Dtype::F16);
    assert_eq!(generics, "f16,1024,-1,-1");
    let ir = tile_ir(&entry, &generics).unwrap();
    assert!(ir.contains("addf") && ir.contains("-> tile<1024xf16>"), "{ir}");
    // a tile that is no power of two does not compile: the check above can fail
    assert!(tile_ir(&entry, "f16,1000,-1,-1").unwrap_err().contains("powers of two"));
}
