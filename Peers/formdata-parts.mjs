// What Node's Response.formData() (undici's parser) makes of a multipart body, as the Swift tests decode it:
// [{name, fileName, contentType, body (base64)}]; a field (no file name) has only name and body. Throws when the
// body does not parse.
export async function formDataParts(body, contentType) {
  const form = await new Response(body, { headers: { 'content-type': contentType ?? '' } }).formData();
  const parts = [];
  for (const [name, value] of form) {
    if (typeof value === 'string') {
      parts.push({ name, body: Buffer.from(value, 'utf8').toString('base64') });
    } else {
      const data = Buffer.from(await value.arrayBuffer()).toString('base64');
      parts.push({ name, fileName: value.name, contentType: value.type, body: data });
    }
  }
  return parts;
}
