#!/usr/bin/env node
// The reference: the npm package gpt-3-encoder's Encoder.js (GPT-2's encoder.py ported to
// JavaScript), run unmodified on texts; prints each file's token ids on one line.
//   node reference_encode.js PACKAGE_DIR [--lossy] [--whole] IN.txt...
// Its exported encode() appends each piece's ids with Array.concat, which makes it quadratic
// in the number of tokens (minutes for 1 MB). By default this script runs the same loop over
// the package's own pattern (pat), byte alphabet (byte_encoder), merging (bpe) and ids
// (encoder), appending in place; --whole calls the exported encode() itself instead.
// Encoder.js takes a JavaScript string, so bytes that are not valid UTF-8 need a decision:
//   default  as GPT-2's Python encoder sees a file read with errors="surrogateescape": each
//            invalid byte becomes the lone surrogate U+DC00+byte (a character in none of
//            \s, \p{L}, \p{N}) and turns back into that same byte when encoded. Encoder.js is
//            given a TextEncoder that does so, so its pattern, byte alphabet and merges run
//            as shipped. This is what ablate matches.
//   --lossy  as Encoder.js behaves when a file is read as UTF-8 the usual way: every invalid
//            sequence becomes U+FFFD and is encoded as the bytes EF BF BD (lossy).
'use strict';
const fs = require('fs');
const path = require('path');
const vm = require('vm');

const [pkg, ...args] = process.argv.slice(2);
const inputs = args.filter(a => !a.startsWith('--')), flags = args.filter(a => a.startsWith('--'));
if (!pkg || !inputs.length || flags.some(f => f !== '--lossy' && f !== '--whole')) {
  console.error('usage: reference_encode.js PACKAGE_DIR [--lossy] [--whole] IN.txt...');
  process.exit(2);
}
const stock = flags.includes('--lossy'), whole = flags.includes('--whole');

// UTF-8 decoding with Python's surrogateescape: an invalid byte becomes U+DC00 + byte.
function decodeEscaped(buf) {
  let out = '';
  for (let i = 0; i < buf.length;) {
    const c = buf[i];
    let need = 0, lo = 0x80, hi = 0xbf;
    if (c < 0x80) { out += String.fromCharCode(c); i++; continue; }
    if (c >= 0xc2 && c <= 0xdf) need = 1;
    else if (c >= 0xe0 && c <= 0xef) { need = 2; if (c === 0xe0) lo = 0xa0; if (c === 0xed) hi = 0x9f; }
    else if (c >= 0xf0 && c <= 0xf4) { need = 3; if (c === 0xf0) lo = 0x90; if (c === 0xf4) hi = 0x8f; }
    let ok = need > 0 && i + need < buf.length + 0;
    for (let k = 1; ok && k <= need; k++) {
      const b = buf[i + k];
      if (b === undefined || b < (k === 1 ? lo : 0x80) || b > (k === 1 ? hi : 0xbf)) ok = false;
    }
    if (!ok) { out += String.fromCharCode(0xdc00 + c); i++; continue; }
    out += buf.subarray(i, i + need + 1).toString('utf8');
    i += need + 1;
  }
  return out;
}

// TextEncoder with surrogateescape: lone U+DC80..U+DCFF back to their byte.
class EscapingEncoder {
  encode(s) {
    const out = [];
    for (const ch of s) {
      const cp = ch.codePointAt(0);
      if (cp >= 0xdc80 && cp <= 0xdcff) out.push(cp - 0xdc00);
      else out.push(...Buffer.from(ch, 'utf8'));
    }
    return Uint8Array.from(out);
  }
}

const file = path.join(pkg, 'Encoder.js');
const sandbox = {
  require, module: {exports: {}}, __dirname: pkg, __filename: file, console,
  TextEncoder: stock ? TextEncoder : EscapingEncoder, TextDecoder,
};
sandbox.exports = sandbox.module.exports;
const context = vm.createContext(sandbox);
vm.runInContext(fs.readFileSync(file, 'utf8'), context, {filename: file});
// encode() as Encoder.js writes it, with push in place of concat; a later script in the same
// context sees the module's top-level declarations
const linear = vm.runInContext(`(text) => {
  const ids = []
  for (const match of text.matchAll(pat)) {
    const token = encodeStr(match[0]).map(x => byte_encoder[x]).join('')
    for (const t of bpe(token).split(' ')) ids.push(encoder[t])
  }
  return ids
}`, context);
for (const input of inputs) {
  const bytes = fs.readFileSync(input);
  const text = stock ? bytes.toString('utf8') : decodeEscaped(bytes);
  const t0 = process.hrtime.bigint();
  const ids = whole ? sandbox.module.exports.encode(text) : linear(text);
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  if (ids.some(x => x === undefined)) throw new Error('Encoder.js produced an undefined id');
  fs.writeSync(1, ids.join(' ') + '\n');
  console.error(`reference_encode: ${input}: ${bytes.length} bytes -> ${ids.length} tokens in ` +
                `${seconds.toFixed(3)} s`);
}
