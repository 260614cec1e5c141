#if os(Linux)
    import Glibc

    /// glibc's `copy_file_range(2)` (2.27 and later), which Swift's Glibc module does not import: copies between two
    /// files inside the kernel, with no buffer in between. `nil` where the C library lacks it.
    enum FileBodyCopy {
        typealias Function =
            @convention(c) (Int32, UnsafeMutablePointer<Int64>?, Int32, UnsafeMutablePointer<Int64>?, Int, UInt32)
            -> Int

        static let copyFileRange: Function? = {
            guard let symbol = dlsym(dlopen(nil, RTLD_NOW), "copy_file_range") else { return nil }
            return unsafeBitCast(symbol, to: Function.self)
        }()
    }
#endif
