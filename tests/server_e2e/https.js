// The official client over HTTPS (`vireo serve --ssl-certfile --ssl-keyfile`): VIREO_URL is https://localhost:PORT
// and NODE_EXTRA_CA_CERTS trusts the server's self-signed certificate, so every call below checks it.
'use strict';
const { client, BASE, test, run, assert, assertEq, modelName } = require('./common');

test('https: the URL is https', async () => {
  assert(BASE.startsWith('https://'), 'VIREO_URL ' + BASE);
});

test('https: models, a chat completion, a streamed completion', async () => {
  const model = await modelName();
  const chat = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'Hello' }], max_tokens: 4, temperature: 0 });
  assertEq(chat.object, 'chat.completion', 'object');
  assert(chat.usage.completion_tokens >= 1, 'completion tokens');
  const stream = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 8, temperature: 0, stream: true, stream_options: { include_usage: true } });
  let text = '', usage = null;
  for await (const chunk of stream) {
    if (chunk.choices.length) text += chunk.choices[0].text;
    if (chunk.usage) usage = chunk.usage;
  }
  assert(usage && usage.completion_tokens === 8, 'usage at the end of the stream: ' + JSON.stringify(usage));
  // The same request unstreamed gives the same greedy text.
  const plain = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 8, temperature: 0 });
  assertEq(plain.choices[0].text, text, 'streamed and plain text');
});

test('https: /health over TLS', async () => {
  const r = await fetch(BASE + '/health');
  assertEq(r.status, 200, '/health');
});

run();
