// Structured outputs (guided decoding) through the official openai client against `vireo serve`
// with the default model (random weights, so only the grammar shapes the output): response_format,
// vLLM's structured_outputs / guided_* fields, tool_choice required and named, and refusals.
'use strict';
const { OpenAI, client, test, run, assert, assertEq, modelName } = require('./common');

let MODEL;

// A validator for the schema subset used here.
function valid(v, s) {
  if (s.enum) return s.enum.some((e) => JSON.stringify(e) === JSON.stringify(v));
  if (s.const !== undefined) return JSON.stringify(s.const) === JSON.stringify(v);
  if (s.anyOf) return s.anyOf.some((b) => valid(v, { ...s, anyOf: undefined, ...b }));
  switch (s.type) {
    case 'boolean': return typeof v === 'boolean';
    case 'integer':
      return Number.isInteger(v) && (s.minimum === undefined || v >= s.minimum) && (s.maximum === undefined || v <= s.maximum);
    case 'string': return typeof v === 'string' && (s.maxLength === undefined || [...v].length <= s.maxLength);
    case 'array':
      return Array.isArray(v) && (s.minItems === undefined || v.length >= s.minItems) &&
        (s.maxItems === undefined || v.length <= s.maxItems) && v.every((x) => !s.items || valid(x, s.items));
    case 'object': {
      if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
      const props = s.properties || {};
      for (const r of s.required || []) if (!(r in v)) return false;
      for (const [k, x] of Object.entries(v)) {
        if (props[k]) { if (!valid(x, props[k])) return false; } else if (s.properties) return false;
      }
      return true;
    }
    default: return true;
  }
}

const SCHEMA = {
  type: 'object',
  properties: {
    answer: { enum: ['yes', 'no'] },
    confidence: { type: 'integer', minimum: 0, maximum: 100 },
    ok: { type: 'boolean' },
    note: { type: 'string', maxLength: 6 },
    tags: { type: 'array', items: { enum: ['a', 'b'] }, maxItems: 2 },
  },
  required: ['answer', 'confidence', 'ok', 'tags'],
};

const WEATHER = {
  type: 'function',
  function: { name: 'get_weather', description: 'Weather for a city',
    parameters: { type: 'object', properties: { city: { enum: ['Paris', 'Rome'] }, days: { type: 'integer', minimum: 1, maximum: 7 } },
      required: ['city', 'days'] } },
};
const TIME = { type: 'function', function: { name: 'get_time', description: 'The time' } };
const messages = [{ role: 'user', content: 'Answer in JSON.' }];

test('setup', async () => { MODEL = await modelName(); });

test('chat: response_format json_schema, n=3 sampled choices all valid', async () => {
  const r = await client.chat.completions.create({ model: MODEL, messages, n: 3, seed: 1, temperature: 1, max_tokens: 300,
    response_format: { type: 'json_schema', json_schema: { name: 'answer', schema: SCHEMA, strict: true } } });
  for (const c of r.choices) {
    assertEq(c.finish_reason, 'stop', 'finish_reason');
    const v = JSON.parse(c.message.content);
    assert(valid(v, SCHEMA), 'valid against the schema: ' + c.message.content);
  }
});

test('chat: the same json_schema on 6 concurrent requests (one cached grammar, shared classifications) all valid', async () => {
  const rs = await Promise.all([0, 1, 2, 3, 4, 5].map((seed) => client.chat.completions.create({ model: MODEL, messages, seed,
    temperature: 1, max_tokens: 300, response_format: { type: 'json_schema', json_schema: { name: 'answer', schema: SCHEMA } } })));
  for (const r of rs) {
    assertEq(r.choices[0].finish_reason, 'stop', 'finish_reason');
    assert(valid(JSON.parse(r.choices[0].message.content), SCHEMA), 'valid: ' + r.choices[0].message.content);
  }
});

test('chat: response_format json_object (streamed) is one object', async () => {
  // The biases favour '"' (id 1) and '}' (id 92) wherever the grammar allows them, so objects close soon.
  const stream = await client.chat.completions.create({ model: MODEL, messages, seed: 3, temperature: 1, max_tokens: 300,
    logit_bias: { 1: 30, 92: 30 }, response_format: { type: 'json_object' }, stream: true });
  let text = '', finish = null;
  for await (const chunk of stream) for (const c of chunk.choices) { text += c.delta.content || ''; finish = c.finish_reason || finish; }
  assertEq(finish, 'stop', 'finish_reason');
  const v = JSON.parse(text);
  assert(typeof v === 'object' && v !== null && !Array.isArray(v), 'an object: ' + text);
});

test('completions: guided_choice and structured_outputs.choice', async () => {
  const choices = ['Paris', 'London', 'Berlin'];
  for (const extra of [{ guided_choice: choices }, { structured_outputs: { choice: choices } }]) {
    const r = await client.completions.create({ model: MODEL, prompt: 'The capital of France is', max_tokens: 20, temperature: 1, seed: 5, n: 2, ...extra });
    for (const c of r.choices) {
      assert(choices.includes(c.text), 'a choice: ' + JSON.stringify(c.text));
      assertEq(c.finish_reason, 'stop', 'finish_reason');
    }
  }
});

test('completions: guided_json (string) and structured_outputs.json with ignore_eos still stop', async () => {
  const schema = { type: 'object', properties: { n: { type: 'integer', minimum: 1, maximum: 3 } }, required: ['n'] };
  for (const extra of [{ guided_json: JSON.stringify(schema) }, { structured_outputs: { json: schema } }]) {
    const r = await client.completions.create({ model: MODEL, prompt: 'JSON:', max_tokens: 100, temperature: 1, seed: 2, ignore_eos: true, ...extra });
    assertEq(r.choices[0].finish_reason, 'stop', 'finish_reason');
    assert(valid(JSON.parse(r.choices[0].text), schema), 'valid: ' + r.choices[0].text);
  }
});

test('completions: guided_regex, structured_outputs.regex and a schema pattern', async () => {
  const re = /^[0-9]{3}-[a-z]{2}(!|\?)?$/;
  for (const extra of [{ guided_regex: '[0-9]{3}-[a-z]{2}(!|\\?)?' }, { structured_outputs: { regex: '\\d{3}-[a-z]{2}(!|\\?)?' } }]) {
    const r = await client.completions.create({ model: MODEL, prompt: 'Code:', max_tokens: 20, temperature: 1, seed: 8, n: 2, ...extra });
    for (const c of r.choices) {
      assert(re.test(c.text), 'matches: ' + JSON.stringify(c.text));
      assertEq(c.finish_reason, 'stop', 'finish_reason');
    }
  }
  const schema = { type: 'object', properties: { id: { type: 'string', pattern: '^[A-Z]{2}-[0-9]{1,3}$' } }, required: ['id'] };
  const r = await client.completions.create({ model: MODEL, prompt: 'JSON:', max_tokens: 60, temperature: 1, seed: 8, guided_json: schema });
  assert(/^[A-Z]{2}-[0-9]{1,3}$/.test(JSON.parse(r.choices[0].text).id), 'pattern: ' + r.choices[0].text);
});

test('chat: tool_choice named returns that function with valid arguments', async () => {
  const r = await client.chat.completions.create({ model: MODEL, messages, tools: [WEATHER, TIME], temperature: 1, seed: 4, max_tokens: 200,
    tool_choice: { type: 'function', function: { name: 'get_weather' } } });
  const c = r.choices[0];
  assertEq(c.finish_reason, 'stop', 'finish_reason');
  assertEq(c.message.tool_calls.length, 1, 'one call');
  assertEq(c.message.tool_calls[0].function.name, 'get_weather', 'name');
  assert(valid(JSON.parse(c.message.tool_calls[0].function.arguments), WEATHER.function.parameters), 'arguments valid');
});

test('chat: tool_choice required returns calls of the given tools (plain and streamed)', async () => {
  const check = (calls) => {
    assert(calls.length >= 1, 'at least one call');
    for (const call of calls) {
      assert(['get_weather', 'get_time'].includes(call.function.name), 'a tool name');
      const args = JSON.parse(call.function.arguments);
      if (call.function.name === 'get_weather') assert(valid(args, WEATHER.function.parameters), 'weather args');
      else assertEq(args, {}, 'get_time has no parameters');
    }
  };
  const params = { model: MODEL, messages, tools: [WEATHER, TIME], tool_choice: 'required', temperature: 1, seed: 9, max_tokens: 400 };
  const r = await client.chat.completions.create(params);
  assertEq(r.choices[0].finish_reason, 'tool_calls', 'finish_reason');
  check(r.choices[0].message.tool_calls);
  const stream = await client.chat.completions.create({ ...params, stream: true });
  const calls = [];
  let finish = null;
  for await (const chunk of stream) for (const c of chunk.choices) {
    for (const tc of c.delta.tool_calls || []) calls.push(tc);
    finish = c.finish_reason || finish;
  }
  assertEq(finish, 'tool_calls', 'stream finish_reason');
  check(calls);
  assertEq(calls.map((c) => c.function.name), r.choices[0].message.tool_calls.map((c) => c.function.name), 'same seed, same calls');
});

test('refusals are OpenAI 400s and the server stays healthy', async () => {
  const expect400 = async (params, param) => {
    try {
      await client.chat.completions.create({ model: MODEL, messages, max_tokens: 5, ...params });
    } catch (e) {
      assert(e instanceof OpenAI.BadRequestError, 'BadRequestError, got ' + e);
      assertEq(e.param, param, 'param of ' + JSON.stringify(params));
      return;
    }
    throw new Error('no error for ' + JSON.stringify(params));
  };
  await expect400({ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'strin' } } } }, 'response_format');
  await expect400({ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'array', uniqueItems: true } } } }, 'response_format');
  await expect400({ guided_grammar: 'root ::= "a"' }, 'guided_grammar');
  await expect400({ guided_regex: '(a)\\1' }, 'guided_regex');
  await expect400({ structured_outputs: { grammar: 'root ::= "a"' } }, 'structured_outputs');
  await expect400({ tools: [WEATHER], tool_choice: { type: 'function', function: { name: 'nope' } } }, 'tool_choice');
  // allowed_token_ids that leave the grammar no token ('&' cannot start "yes" or "no"): the engine fails the
  // request as its own fault at its first mask (sampling_batch.cc), as vLLM users would want, not a 500.
  await expect400({ allowed_token_ids: [5], structured_outputs: { choice: ['yes', 'no'] } }, null);
  const ok = await client.chat.completions.create({ model: MODEL, messages, max_tokens: 3, temperature: 0 });
  assertEq(ok.choices.length, 1, 'still serving');
});

run();
