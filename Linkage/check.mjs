// Reads what Linkage/check.sh made: for each build, the program's printed JSON, its body, its ldd lines and a copy of
// the binary. Fails (exit 1) unless Node's multipart parser finds the field and the file (byte for byte the
// executable) in every body, every form-only build links neither libFoundationNetworking nor libcurl, and
// form-with-transport links both (else the check would prove nothing); no build links SQLite (MultipartQueue's).
import fs from 'node:fs';
import path from 'node:path';

const [work] = process.argv.slice(2);
const transport = /libFoundationNetworking|libcurl/;
let failed = false;
const fail = (message) => { console.error(`linkage: ${message}`); failed = true; };
const builds = ['form-only-static', 'form-only', 'form-with-transport', 'form-with-transport-static']
  .filter((label) => fs.existsSync(path.join(work, `${label}.json`)));

for (const label of builds) {
  const file = (ending) => path.join(work, `${label}.${ending}`);
  const program = label.replace(/-static$/, '');
  const printed = JSON.parse(fs.readFileSync(file('json'), 'utf8'));
  const body = fs.readFileSync(file('multipart'));
  const executable = fs.readFileSync(file('bin'));
  if (body.length !== printed.contentLength) fail(`${label}: ${body.length} bytes, Content-Length ${printed.contentLength}`);
  const form = await new Response(body, { headers: { 'content-type': printed.contentType } }).formData();
  const part = form.get('binary');
  if (form.get('check') !== 'linkage') fail(`${label}: the field did not parse`);
  if (!part || part.name !== program || !Buffer.from(await part.arrayBuffer()).equals(executable)) {
    fail(`${label}: the file part is not the executable`);
  }
  const ldd = fs.readFileSync(file('ldd'), 'utf8').trim().split('\n').map((line) => line.trim());
  const linked = ldd.filter((line) => transport.test(line));
  if (program === 'form-only' && linked.length > 0) fail(`${label} links the transport: ${linked.join('; ')}`);
  if (label === 'form-with-transport' && linked.length < 2) fail(`${label} does not link the transport`);
  // SQLite is the MultipartQueue product's alone: neither the form nor URLSession's uploads link it.
  const sqlite = ldd.filter((line) => /libsqlite3/.test(line));
  if (sqlite.length > 0) fail(`${label} links SQLite, which only MultipartQueue needs: ${sqlite.join('; ')}`);
  console.log(`${label}: ${(executable.length / 1048576).toFixed(1)} MiB, its body of ${body.length} bytes parsed by Node`);
  for (const line of ldd) console.log(`  ${line}`);
}
if (!builds.includes('form-only-static') || !builds.includes('form-with-transport')) fail('a build is missing');
process.exit(failed ? 1 : 0);
