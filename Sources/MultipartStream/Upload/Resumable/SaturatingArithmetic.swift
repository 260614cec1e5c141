/// Arithmetic on a server's numbers, and on sizes and times made from them, that cannot trap: a server can send any
/// offset or limit, and no answer may stop the process.
extension UInt64 {
    /// `self + other`, or `UInt64.max` where that overflows.
    func addingSaturated(_ other: UInt64) -> UInt64 {
        let (sum, overflow) = addingReportingOverflow(other)
        return overflow ? .max : sum
    }

    /// `self - other`, or 0 where that is negative.
    package func subtractingSaturated(_ other: UInt64) -> UInt64 {
        self > other ? self - other : 0
    }

    /// `self * factor`, or `UInt64.max` where that overflows.
    func multipliedSaturated(by factor: UInt64) -> UInt64 {
        let (product, overflow) = multipliedReportingOverflow(by: factor)
        return overflow ? .max : product
    }
}
