// Shared helpers for the end-to-end scripts: the OpenAI client against VIREO_URL, a tiny test
// runner, and /metrics parsing.
'use strict';
const path = require('path');
const OpenAI = require(path.join(__dirname, '../../tools/npm/node_modules/openai'));

const BASE = process.env.VIREO_URL || 'http://127.0.0.1:8000';
const client = new OpenAI({ baseURL: BASE + '/v1', apiKey: process.env.VIREO_API_KEY || 'none', maxRetries: 0, timeout: parseInt(process.env.VIREO_E2E_TIMEOUT_MS || '120000', 10) });

const tests = [];
function test(name, fn) { tests.push({ name, fn }); }

async function run() {
  let failed = 0;
  for (const t of tests) {
    const start = Date.now();
    try {
      await t.fn();
      console.log(`ok   ${t.name} (${Date.now() - start} ms)`);
    } catch (e) {
      failed++;
      console.log(`FAIL ${t.name}: ${e && e.stack ? e.stack : e}`);
    }
  }
  console.log(failed ? `${failed} of ${tests.length} failed` : `all ${tests.length} passed`);
  process.exit(failed ? 1 : 0);
}

function assert(cond, msg) { if (!cond) throw new Error('assertion failed: ' + msg); }
function assertEq(a, b, msg) {
  if (JSON.stringify(a) !== JSON.stringify(b)) throw new Error(`${msg}: ${JSON.stringify(a)} !== ${JSON.stringify(b)}`);
}

async function metrics() {
  const r = await fetch(BASE + '/metrics');
  assert(r.ok, '/metrics status ' + r.status);
  return r.text();
}

// The value of the first sample named `name` (optionally with a label substring).
function metricValue(text, name, labelPart = '') {
  for (const line of text.split('\n')) {
    if (line.startsWith(name + '{') && line.includes(labelPart)) return parseFloat(line.slice(line.lastIndexOf(' ') + 1));
  }
  throw new Error('metric not found: ' + name + ' ' + labelPart);
}

async function modelName() {
  const models = await client.models.list();
  return models.data[0].id;
}

async function streamCompletionText(params, options) {
  const stream = await client.completions.create({ ...params, stream: true }, options);
  let text = '';
  let finish = null;
  for await (const chunk of stream) {
    for (const c of chunk.choices) {
      text += c.text;
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  return { text, finish };
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

module.exports = { OpenAI, client, BASE, test, run, assert, assertEq, metrics, metricValue, modelName, streamCompletionText, sleep };
