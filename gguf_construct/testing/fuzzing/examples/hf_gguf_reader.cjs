// A line-protocol adapter for @huggingface/gguf (npm), to copy for your own reader.
//
//   npm install @huggingface/gguf
//   gguf-construct fuzz --against "node $(python -c 'import gguf_construct.testing.fuzzing as f, pathlib; print(pathlib.Path(f.__file__).parent / "examples" / "hf_gguf_reader.cjs")')"
//
// Protocol: one path per line on stdin; one JSON line per path on stdout, in order:
//   {"ok": true, "view": {...}}  or  {"ok": false, "error": "..."}
// The view (docs/howto/fuzz.md): version, alignment, data_offset, kv [[key, type, value]], tensors
// [[name, type, shape, offset, nbytes]], dequant {}; anything the reader does not expose is "unknown".
// Floats are compared as IEEE bit patterns (f32 as a u32, f64 as a u64), big integers as JSON integers.
"use strict";
const readline = require("node:readline");
const { gguf, GGUFValueType, GGMLQuantizationType } = require("@huggingface/gguf");

const LABEL = { UINT8: "u8", INT8: "i8", UINT16: "u16", INT16: "i16", UINT32: "u32", INT32: "i32", FLOAT32: "f32", BOOL: "bool",
  STRING: "str", ARRAY: "arr", UINT64: "u64", INT64: "i64", FLOAT64: "f64" };
const HEADER = new Set(["version", "tensor_count", "kv_count"]);

function bits(value, label) {
  // a float as its bit pattern; the reader returns doubles, so a signalling f32 NaN comes back quiet
  if (label === "f32") { const b = new DataView(new ArrayBuffer(4)); b.setFloat32(0, Number(value), true); return b.getUint32(0, true); }
  if (label === "f64") { const b = new DataView(new ArrayBuffer(8)); b.setFloat64(0, Number(value), true); return b.getBigUint64(0, true); }
  if (label === "bool") return value ? 1 : 0;
  return value;
}

function view(parsed) {
  const kv = [];
  for (const [key, entry] of Object.entries(parsed.typedMetadata)) {
    if (HEADER.has(key)) continue;
    const label = LABEL[GGUFValueType[entry.type]] ?? "unknown";
    if (label === "arr") {
      const sub = LABEL[GGUFValueType[entry.subType]] ?? "unknown";
      const values = sub === "arr" ? "unknown" : Array.from(entry.value, (v) => bits(v, sub));
      kv.push([key, `arr[${sub}]`, values]);
    } else {
      kv.push([key, label, bits(entry.value, label)]);
    }
  }
  const tensors = parsed.tensorInfos.map((t) => [t.name, String(GGMLQuantizationType[t.dtype] ?? t.dtype).toLowerCase(),
    t.shape.map((d) => d), t.offset, "unknown"]);
  return { version: parsed.metadata.version, alignment: "unknown", data_offset: parsed.tensorDataOffset, kv, tensors, dequant: {} };
}

// JSON with BigInts written as plain integers
function dumps(obj) {
  return JSON.stringify(obj, (_k, v) => (typeof v === "bigint" ? `@@big:${v}@@` : v)).replace(/"@@big:(-?\d+)@@"/g, "$1");
}

const lines = readline.createInterface({ input: process.stdin, terminal: false });
let queue = Promise.resolve();
lines.on("line", (path) => {
  // answers must come back in order: chain each request on the previous one
  queue = queue.then(async () => {
    let answer;
    try {
      answer = { ok: true, view: view(await gguf(path, { allowLocalFile: true, typedMetadata: true })) };
    } catch (e) {
      answer = { ok: false, error: `${e && e.name}: ${String(e && e.message).split("\n")[0]}`.slice(0, 400) };
    }
    process.stdout.write(dumps(answer) + "\n");
  });
});
