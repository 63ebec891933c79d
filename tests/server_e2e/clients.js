// What real clients do that vLLM serves and a stricter server would refuse: several served names,
// lm-eval-harness' prompt scoring (echo + max_tokens 0 + logprobs), chat prefill with echo,
// reasoning_effort, default-valued fields, custom roles; run with --served-model-name main alias.
'use strict';
const { OpenAI, BASE, test, run, assert, assertEq, metrics, metricValue } = require('./common');

const client = new OpenAI({ baseURL: BASE + '/v1', apiKey: 'none', maxRetries: 0 });
const user = (content) => [{ role: 'user', content }];

test('models: every served name, any of them accepted, responses carry the first', async () => {
  const models = await client.models.list();
  assertEq(models.data.map((m) => m.id), ['main', 'alias'], 'ids');
  for (const model of ['main', 'alias']) {
    const r = await client.completions.create({ model, prompt: 'Hi', max_tokens: 2 });
    assertEq(r.model, 'main', 'response model for ' + model);
  }
  try {
    await client.completions.create({ model: 'gpt-4o', prompt: 'Hi', max_tokens: 2 });
    assert(false, 'unknown model accepted');
  } catch (e) {
    assertEq(e.status, 404, 'status');
    assert(e instanceof OpenAI.NotFoundError, 'NotFoundError');
    assertEq(e.error.param, 'model', 'param');
  }
});

test('completions: echo + max_tokens 0 scores the prompt (lm-eval-harness loglikelihood)', async () => {
  const prompt = 'The capital of France is Paris';
  const r = await client.completions.create({ model: 'main', prompt, max_tokens: 0, echo: true, logprobs: 1, temperature: 0 });
  const c = r.choices[0];
  assertEq(c.text, prompt, 'text is the prompt alone');
  assertEq(c.logprobs.tokens.length, r.usage.prompt_tokens, 'one entry per prompt token');
  assertEq(c.logprobs.tokens.join(''), prompt, 'tokens join to the prompt');
  assertEq(c.logprobs.token_logprobs[0], null, 'first token has none');
  assert(c.logprobs.token_logprobs.slice(1).every((x) => x <= 0), 'logprobs');
  const s = await client.completions.create({ model: 'main', prompt, max_tokens: 0, echo: true, stream: true });
  let text = '';
  for await (const chunk of s) for (const ch of chunk.choices) text += ch.text;
  assertEq(text, prompt, 'streamed');
});

test('chat: echo with continue_final_message returns the whole assistant message', async () => {
  const messages = [...user('Name a colour.'), { role: 'assistant', content: 'My answer is' }];
  const r = await client.chat.completions.create({ model: 'main', messages, max_tokens: 4, temperature: 0,
    echo: true, continue_final_message: true, add_generation_prompt: false });
  assert(r.choices[0].message.content.startsWith('My answer is'), 'echoed: ' + r.choices[0].message.content);
  assert(!('tool_calls' in r.choices[0].message), 'no tool_calls key without calls');
});

test('chat: reasoning_effort "none" turns Qwen3 thinking off in the prompt', async () => {
  const base = { model: 'main', messages: user('Hi'), max_tokens: 1 };
  const plain = await client.chat.completions.create(base);
  const none = await client.chat.completions.create({ ...base, reasoning_effort: 'none' });
  const off = await client.chat.completions.create({ ...base, chat_template_kwargs: { enable_thinking: false } });
  assertEq(none.usage.prompt_tokens, off.usage.prompt_tokens, 'same prompt as enable_thinking false');
  assert(none.usage.prompt_tokens > plain.usage.prompt_tokens, 'the empty think block was added');
});

test('chat: default-valued fields and custom roles are accepted', async () => {
  await client.chat.completions.create({ model: 'main', messages: user('Hi'), max_tokens: 1, top_logprobs: 0 });
  await client.chat.completions.create({ model: 'main', max_tokens: 1,
    messages: [...user('What is 6*7?'), { role: 'ipython', content: '42' }] });
});

test('a dropped stream frees its sequence', async () => {
  const ac = new AbortController();
  const s = await client.chat.completions.create({ model: 'main', messages: user('Count.'), max_tokens: 400, ignore_eos: true,
    stream: true }, { signal: ac.signal });
  let n = 0;
  try {
    for await (const chunk of s) if (++n === 3) ac.abort();
  } catch (e) { /* the abort */ }
  for (let i = 0; i < 50; i++) {
    const m = await metrics();
    if (metricValue(m, 'vllm:num_requests_running') === 0 && metricValue(m, 'vllm:kv_cache_usage_perc') === 0) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  assert(false, 'the aborted request still runs');
});

run();
