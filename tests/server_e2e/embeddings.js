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

async function post(path, body) {
  const r = await fetch(BASE + path, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
  return { status: r.status, body: await r.json() };
}

const cos = (a, b) => a.reduce((s, x, i) => s + x * b[i], 0) / (norm(a) * norm(b));

test('score and rerank: cosine similarities of the embeddings, reranked best first', async () => {
  const model = await modelName();
  const docs = ['Paris is the capital of France.', 'Bananas are yellow.', 'France is in Europe.'];
  const emb = await client.embeddings.create({ model, input: ['capital of France', ...docs], encoding_format: 'float' });
  const want = docs.map((_, i) => cos(emb.data[0].embedding, emb.data[i + 1].embedding));
  for (const path of ['/score', '/v1/score']) {
    const r = await post(path, { model, text_1: 'capital of France', text_2: docs });
    assertEq(r.status, 200, path + ' status');
    assertEq(r.body.data.map((d) => d.index), [0, 1, 2], 'indices');
    r.body.data.forEach((d, i) => assert(Math.abs(d.score - want[i]) < 1e-5, `${path} score ${i}: ${d.score} vs ${want[i]}`));
  }
  const pair = await post('/score', { model, text_1: docs, text_2: docs });
  pair.body.data.forEach((d) => assert(Math.abs(d.score - 1) < 1e-5, 'a text against itself'));
  for (const path of ['/rerank', '/v1/rerank', '/v2/rerank']) {
    const r = await post(path, { model, query: 'capital of France', documents: docs, top_n: 2 });
    assertEq(r.status, 200, path + ' status');
    assertEq(r.body.results.length, 2, 'top_n');
    const best = want.map((w, i) => [w, i]).sort((a, b) => b[0] - a[0]);
    assertEq(r.body.results.map((x) => x.index), [best[0][1], best[1][1]], 'order');
    assertEq(r.body.results[0].document.text, docs[best[0][1]], 'document');
    assert(r.body.usage.total_tokens > 0, 'usage');
  }
  assertEq((await post('/rerank', { model, query: 'q', documents: [] })).status, 400, 'no documents');
  assertEq((await post('/score', { model, text_1: ['a', 'b'], text_2: ['c', 'd', 'e'] })).status, 400, 'mismatched lists');
});

run();
