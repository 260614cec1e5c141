// `import MultipartQueue` brings what the queue's API names with it (`MultipartFormData`, `MultipartResumption`,
// `MultipartPacing`, `MultipartHeaders`, `MultipartError`), as `MultipartStream` brings the form: a program that
// uses the queue needs no second import.
@_exported import MultipartStream
