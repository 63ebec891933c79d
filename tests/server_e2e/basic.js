// Completions and chat through the official openai client against `vireo serve` (default model).
'use strict';
const { OpenAI, client, test, run, assert, assertEq, metrics, metricValue, modelName, streamCompletionText, sleep } = require('./common');

let MODEL;
const PROMPT = 'The capital of France is';

test('models list', async () => {
  MODEL = await modelName();
  const models = await client.models.list();
  assertEq(models.data.length, 1, 'one model');
  assert(models.data[0].max_model_len > 0, 'max_model_len');
});

test('completion: non-streaming equals streaming (greedy)', async () => {
  const params = { model: MODEL, prompt: PROMPT, max_tokens: 8, temperature: 0, ignore_eos: true };
  const r = await client.completions.create(params);
  assert(r.id.startsWith('cmpl-'), 'id');
  assertEq(r.object, 'text_completion', 'object');
  assertEq(r.choices.length, 1, 'choices');
  assertEq(r.choices[0].finish_reason, 'length', 'finish_reason');
  assertEq(r.usage.completion_tokens, 8, 'completion_tokens');
  assert(r.usage.prompt_tokens > 0 && r.usage.total_tokens === r.usage.prompt_tokens + 8, 'usage');
  const s = await streamCompletionText(params);
  assertEq(s.text, r.choices[0].text, 'stream text');
  assertEq(s.finish, 'length', 'stream finish');
});

test('completion: stream_options.include_usage', async () => {
  const stream = await client.completions.create({ model: MODEL, prompt: PROMPT, max_tokens: 4, temperature: 0, ignore_eos: true,
    stream: true, stream_options: { include_usage: true } });
  let usage = null;
  for await (const chunk of stream) if (chunk.usage) usage = chunk.usage;
  assert(usage && usage.completion_tokens === 4, 'final usage chunk');
});

test('completion: logprobs and echo', async () => {
  const r = await client.completions.create({ model: MODEL, prompt: PROMPT, max_tokens: 4, temperature: 0, logprobs: 3, ignore_eos: true });
  const lp = r.choices[0].logprobs;
  assertEq(lp.tokens.length, 4, 'tokens');
  assertEq(lp.token_logprobs.length, 4, 'token_logprobs');
  assertEq(lp.text_offset.length, 4, 'text_offset');
  for (let i = 0; i < 4; i++) {
    assert(lp.token_logprobs[i] <= 0, 'logprob <= 0');
    const n = Object.keys(lp.top_logprobs[i]).length;
    assert(n >= 1 && n <= 4, 'top_logprobs size ' + n);
  }
  assertEq(lp.tokens.join(''), r.choices[0].text, 'tokens join to the text');
  const e = await client.completions.create({ model: MODEL, prompt: PROMPT, max_tokens: 3, temperature: 0, echo: true, logprobs: 1, ignore_eos: true });
  assert(e.choices[0].text.startsWith(PROMPT), 'echo prepends the prompt');
  const elp = e.choices[0].logprobs;
  assert(elp.token_logprobs[0] === null, 'first prompt token has no logprob');
  assertEq(elp.tokens.length, e.usage.prompt_tokens + 3, 'prompt + generated entries');
});

test('completion: n=2 and batched prompts', async () => {
  const r = await client.completions.create({ model: MODEL, prompt: PROMPT, max_tokens: 4, n: 2, seed: 7, temperature: 1.0 });
  assertEq(r.choices.map((c) => c.index).sort(), [0, 1], 'indexes');
  const again = await client.completions.create({ model: MODEL, prompt: PROMPT, max_tokens: 4, n: 2, seed: 7, temperature: 1.0 });
  assertEq(again.choices.map((c) => c.text), r.choices.map((c) => c.text), 'seeded n=2 reproducible');
  const b = await client.completions.create({ model: MODEL, prompt: ['Hello', 'World'], max_tokens: 2, temperature: 0 });
  assertEq(b.choices.length, 2, 'batch choices');
});

test('completion: stop strings (non-streaming and streaming)', async () => {
  const base = { model: MODEL, prompt: PROMPT, max_tokens: 16, temperature: 0, ignore_eos: true };
  const full = (await client.completions.create(base)).choices[0].text;
  assert(full.length >= 6, 'need some text: ' + JSON.stringify(full));
  const stop = full.slice(3, 5);
  const want = full.slice(0, full.indexOf(stop));
  const r = await client.completions.create({ ...base, stop: [stop] });
  assertEq(r.choices[0].text, want, 'truncated before the stop string');
  assertEq(r.choices[0].finish_reason, 'stop', 'finish_reason');
  assertEq(r.choices[0].stop_reason, stop, 'stop_reason');
  const s = await streamCompletionText({ ...base, stop });
  assertEq(s.text, want, 'streamed text holds the stop string back');
  assertEq(s.finish, 'stop', 'stream finish');
});

test('chat: non-streaming equals streaming, template kwargs, logprobs', async () => {
  const params = { model: MODEL, messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: [{ type: 'text', text: 'Hi!' }] }],
    max_tokens: 6, temperature: 0, ignore_eos: true, chat_template_kwargs: { enable_thinking: false } };
  const r = await client.chat.completions.create(params);
  assert(r.id.startsWith('chatcmpl-'), 'id');
  assertEq(r.choices[0].message.role, 'assistant', 'role');
  assertEq(r.usage.completion_tokens, 6, 'usage');
  const stream = await client.chat.completions.create({ ...params, stream: true });
  let text = '';
  let first = true;
  let finish = null;
  for await (const chunk of stream) {
    const c = chunk.choices[0];
    if (first) { assertEq(c.delta.role, 'assistant', 'first delta has the role'); first = false; }
    if (c.delta.content) text += c.delta.content;
    if (c.finish_reason) finish = c.finish_reason;
  }
  assertEq(text, r.choices[0].message.content, 'stream equals non-stream');
  assertEq(finish, 'length', 'finish');
  const lp = await client.chat.completions.create({ ...params, logprobs: true, top_logprobs: 2 });
  assertEq(lp.choices[0].logprobs.content.length, 6, 'one entry per token');
  assertEq(lp.choices[0].logprobs.content[0].top_logprobs.length, 2, 'top_logprobs');
  const n2 = await client.chat.completions.create({ ...params, n: 2 });
  assertEq(n2.choices.length, 2, 'chat n=2');
  assertEq(n2.choices[1].message.content, r.choices[0].message.content, 'greedy choices agree');
});

test('errors surface as openai.APIError with the right status', async () => {
  const expectError = async (fn, status, cls) => {
    try { await fn(); } catch (e) {
      assert(e instanceof OpenAI.APIError, 'APIError, got ' + e);
      assertEq(e.status, status, 'status');
      assert(e instanceof cls, 'class ' + cls.name + ', got ' + e.constructor.name);
      return e;
    }
    throw new Error('no error thrown');
  };
  await expectError(() => client.completions.create({ model: 'no-such-model', prompt: 'x' }), 404, OpenAI.NotFoundError);
  const t = await expectError(() => client.completions.create({ model: MODEL, prompt: 'x', temperature: -1 }), 400, OpenAI.BadRequestError);
  assertEq(t.error.param, 'temperature', 'param');
  const models = await client.models.list();
  const maxLen = models.data[0].max_model_len;
  const long = await expectError(() => client.completions.create({ model: MODEL, prompt: 'x', max_tokens: maxLen + 5 }), 400, OpenAI.BadRequestError);
  assert(long.message.includes(String(maxLen)) && long.message.includes(String(maxLen + 5)), 'message names both numbers: ' + long.message);
  await expectError(() => client.chat.completions.create({ model: MODEL, messages: [], stream: true }), 400, OpenAI.BadRequestError);
  await expectError(() => client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'http://x' } }] }] }), 400, OpenAI.BadRequestError);
});

test('64 concurrent greedy streams equal the same requests run alone', async () => {
  const prompts = ['Once upon a time', 'def fib(n):', '1, 2, 3,', 'Hello'];
  const params = (p) => ({ model: MODEL, prompt: p, max_tokens: 12, temperature: 0, ignore_eos: true });
  const alone = [];
  for (const p of prompts) alone.push((await streamCompletionText(params(p))).text);
  const jobs = [];
  for (let i = 0; i < 64; i++) jobs.push(streamCompletionText(params(prompts[i % prompts.length])));
  const results = await Promise.all(jobs);
  results.forEach((r, i) => assertEq(r.text, alone[i % prompts.length], 'stream ' + i));
});

test('disconnecting half the clients mid-stream frees everything', async () => {
  const before = await metrics();
  const abortsBefore = metricValue(before, 'vllm:request_success_total', 'finished_reason="abort"');
  const jobs = [];
  for (let i = 0; i < 16; i++) {
    const controller = new AbortController();
    const drop = i % 2 === 0;
    jobs.push((async () => {
      const stream = await client.completions.create({ model: MODEL, prompt: 'Count: 1, 2, 3,', max_tokens: drop ? 400 : 16,
        temperature: 0, ignore_eos: true, stream: true }, { signal: controller.signal });
      let chunks = 0;
      try {
        for await (const chunk of stream) {
          chunks++;
          if (drop && chunks === 2) controller.abort();
        }
      } catch (e) {
        if (!drop) throw e;
        return 'aborted';
      }
      // openai v4 ends the iteration quietly on an abort.
      if (drop) return controller.signal.aborted && chunks < 400 ? 'aborted' : 'not aborted';
      return chunks >= 16 ? 'done' : 'short stream';
    })());
  }
  const results = await Promise.all(jobs);
  results.forEach((r, i) => assertEq(r, i % 2 === 0 ? 'aborted' : 'done', 'client ' + i));
  let m;
  for (let t = 0; t < 100; t++) {
    m = await metrics();
    if (metricValue(m, 'vllm:num_requests_running') === 0 && metricValue(m, 'vllm:kv_cache_usage_perc') === 0) break;
    await sleep(100);
  }
  assertEq(metricValue(m, 'vllm:num_requests_running'), 0, 'running');
  assertEq(metricValue(m, 'vllm:num_requests_waiting'), 0, 'waiting');
  assertEq(metricValue(m, 'vllm:kv_cache_usage_perc'), 0, 'kv usage');
  const aborts = metricValue(m, 'vllm:request_success_total', 'finished_reason="abort"') - abortsBefore;
  assert(aborts >= 8, 'abort count ' + aborts);
});

run();
