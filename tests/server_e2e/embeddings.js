// /v1/embeddings with the official client against `vireo serve --runner pooling` (the built-in default
// model as an embedding model: LAST pooling, normalised). The SDK asks for base64 unless told otherwise.
'use strict';
const { OpenAI, client, BASE, test, run, assert, assertEq, modelName } = require('./common');

const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));
const maxDiff = (a, b) => a.reduce((m, x, i) => Math.max(m, Math.abs(x - b[i])), 0);

test('embeddings: one string, base64 by default, unit length', async () => {
  const model = await modelName();
  const r = await client.embeddings.create({ model, input: 'The quick brown fox' });
  assertEq(r.object, 'list', 'object');
  assertEq(r.model, model, 'model');
  assertEq(r.data.length, 1, 'one embedding');
  const e = r.data[0].embedding;
  assertEq(e.length, 256, 'the default model hidden size');
  assert(Math.abs(norm(e) - 1) < 1e-4, 'normalised: ' + norm(e));
  assert(r.usage.prompt_tokens > 0 && r.usage.total_tokens === r.usage.prompt_tokens, 'usage');
});

test('embeddings: a batch keeps its order; float and base64 agree; token ids as input', async () => {
  const model = await modelName();
  const input = ['alpha beta', 'gamma', 'alpha beta'];
  const b64 = await client.embeddings.create({ model, input });
  const flt = await client.embeddings.create({ model, input, encoding_format: 'float' });
  assertEq(b64.data.map((d) => d.index), [0, 1, 2], 'indices');
  for (let i = 0; i < 3; i++) assert(maxDiff(b64.data[i].embedding, flt.data[i].embedding) === 0, 'base64 == float ' + i);
  assert(maxDiff(flt.data[0].embedding, flt.data[2].embedding) === 0, 'same text, same embedding');
  assert(maxDiff(flt.data[0].embedding, flt.data[1].embedding) > 1e-3, 'other text, other embedding');
  const tok = await (await fetch(BASE + '/tokenize', { method: 'POST', headers: { 'Content-Type': 'application/json' },
                                                      body: JSON.stringify({ model, prompt: 'gamma' }) })).json();
  const ids = await client.embeddings.create({ model, input: tok.tokens, encoding_format: 'float' });
  assert(maxDiff(ids.data[0].embedding, flt.data[1].embedding) < 1e-6, 'token ids == text');
});

test('embeddings: bad requests are 400s; generation is refused on a pooling server', async () => {
  const model = await modelName();
  for (const [body, param] of [[{ input: 'x', dimensions: 7 }, 'dimensions'], [{ input: [] }, 'input'],
                               [{ input: 'x', encoding_format: 'int8' }, 'encoding_format'], [{ input: [[1, -2]] }, 'input']]) {
    try {
      await client.embeddings.create({ model, ...body });
      assert(false, 'accepted ' + JSON.stringify(body));
    } catch (e) {
      assertEq(e.status, 400, 'status for ' + JSON.stringify(body));
      assert(e instanceof OpenAI.BadRequestError, 'BadRequestError');
      assertEq(e.error.param, param, 'param');
    }
  }
  try {
    await client.completions.create({ model, prompt: 'Hi', max_tokens: 2 });
    assert(false, 'completion accepted');
  } catch (e) {
    assertEq(e.status, 400, 'completions status');
    assert(/Completions API/.test(e.message), e.message);
  }
});

run();
