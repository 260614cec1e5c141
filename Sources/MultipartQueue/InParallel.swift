import Foundation
import MultipartStream

/// `transform` of each element, in order, the elements shared among the cores in slices (a thousand queue records
/// take 28 µs each to encode alone); the first error, in order, is thrown.
func inParallel<Element: Sendable, Value: Sendable>(
    _ elements: [Element], _ transform: @Sendable (Element) throws(MultipartError) -> Value
) throws(MultipartError) -> [Value] {
    guard elements.count >= 64 else {
        var values: [Value] = []
        values.reserveCapacity(elements.count)
        for element in elements { values.append(try transform(element)) }
        return values
    }
    let slices = min(elements.count / 32, ProcessInfo.processInfo.activeProcessorCount * 4)
    let places = Places<Result<Value, MultipartError>>(count: elements.count)
    defer { places.deallocate() }
    DispatchQueue.concurrentPerform(iterations: slices) { slice in
        for place in (elements.count * slice / slices)..<(elements.count * (slice + 1) / slices) {
            do throws(MultipartError) {
                places.set(place, .success(try transform(elements[place])))
            } catch {
                places.set(place, .failure(error))
            }
        }
    }
    // Every place taken before any error is thrown: none is left behind.
    let results = (0..<elements.count).map { places.take($0) }
    var values: [Value] = []
    values.reserveCapacity(elements.count)
    for result in results { values.append(try result.get()) }
    return values
}

/// Memory for one value a place, each place written by one thread alone and read once they all are.
private struct Places<Value>: @unchecked Sendable {
    // @unchecked: every place is written by one slice alone, and read after `concurrentPerform` returned.
    private let pointer: UnsafeMutablePointer<Value>

    init(count: Int) {
        pointer = .allocate(capacity: count)
    }

    func set(_ place: Int, _ value: Value) {
        (pointer + place).initialize(to: value)
    }

    /// The value of `place`, moved out: each place is taken once.
    func take(_ place: Int) -> Value {
        (pointer + place).move()
    }

    func deallocate() {
        pointer.deallocate()
    }
}
